#include <jitunwind/toolkit/budget.hpp>

#include <jitunwind/toolkit/format.hpp>

namespace jitunwind::toolkit {

result<void> memory_budget::take(uint64_t bytes, std::string_view what) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || used > limit_ - bytes) {
      refusals_.fetch_add(1, std::memory_order_relaxed);
      std::string msg = "memory budget of " + size_text(limit_) + " reached: " + std::string(what) +
                        " needs " + size_text(bytes) + ", " + size_text(used) +
                        " of the target's data are held";
      if (!hint_.empty()) msg += " (" + hint_ + ")";
      return error(errc::limit_exceeded, std::move(msg));
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (used + bytes > peak &&
         !peak_.compare_exchange_weak(peak, used + bytes, std::memory_order_relaxed)) {
  }
  return {};
}

void memory_budget::give_back(uint64_t bytes) noexcept {
  used_.fetch_sub(bytes, std::memory_order_relaxed);
}

result<budget_charge> budget_charge::take(memory_budget* budget, uint64_t bytes,
                                          std::string_view what) {
  budget_charge c;
  if (auto r = c.grow(budget, bytes, what); !r) return std::move(r).error();
  return c;
}

result<void> budget_charge::grow(memory_budget* budget, uint64_t bytes, std::string_view what) {
  if (budget == nullptr) return {};
  if (auto r = budget->take(bytes, what); !r) return r;
  budget_ = budget;
  bytes_ += bytes;
  return {};
}

void budget_charge::shrink_to(uint64_t bytes) noexcept {
  if (bytes >= bytes_) return;
  if (budget_ != nullptr) budget_->give_back(bytes_ - bytes);
  bytes_ = bytes;
}

void budget_charge::release() noexcept {
  if (budget_ != nullptr) budget_->give_back(bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

std::string size_text(uint64_t bytes) {
  constexpr uint64_t kib = 1024, mib = kib * 1024, gib = mib * 1024;
  auto scaled = [&](uint64_t unit, const char* name) {
    if (bytes % unit == 0)
      return format("%llu %s", static_cast<unsigned long long>(bytes / unit), name);
    return format("%.1f %s", static_cast<double>(bytes) / static_cast<double>(unit), name);
  };
  if (bytes >= gib) return scaled(gib, "GiB");
  if (bytes >= mib) return scaled(mib, "MiB");
  if (bytes >= 16 * kib) return scaled(kib, "KiB");
  return format("%llu byte%s", static_cast<unsigned long long>(bytes), bytes == 1 ? "" : "s");
}

}  // namespace jitunwind::toolkit
