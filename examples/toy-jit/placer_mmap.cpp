// Temporary code placement without the SDK (bring-up only): anonymous pages, W^X by mprotect.
#include "placer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <jitunwind/sframe.h>

#include <cstring>

namespace toyjit {

namespace {

class mmap_placer final : public code_placer {
 public:
  bool place(const std::string& name, generated_function& g, const placed_function*,
             placed_function& out, std::string& error) override {
    const size_t need = (g.size() + 15) & ~size_t{15};
    if (base_ == nullptr || cursor_ + need > end_) {
      const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
      const size_t bytes = std::max(need, size_t{1} << 20);
      void* p = mmap(nullptr, (bytes + page - 1) & ~(page - 1), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        error = std::string("mmap: ") + std::strerror(errno);
        return false;
      }
      base_ = cursor_ = static_cast<uint8_t*>(p);
      end_ = base_ + bytes;
      pending_ = cursor_;
      jitunwind::sframe::encoder_options eo;
      eo.section_address = reinterpret_cast<uint64_t>(base_);
      arenas_.push_back({reinterpret_cast<uint64_t>(base_),
                         reinterpret_cast<uint64_t>(end_),
                         jitunwind::sframe::encoder::create(eo).value(),
                         {}});
    }
    const uint64_t address = reinterpret_cast<uint64_t>(cursor_);
    auto frames = g.place(address, {cursor_, need});
    if (!frames) {
      error = frames.error().message();
      return false;
    }
    out.name = name;
    out.start = address;
    out.size = g.size();
    out.frames = std::move(*frames);
    if (auto r = arenas_.back().sframe.append(out.frames); !r) {
      error = r.error().message();
      return false;
    }
    cursor_ += need;
    return true;
  }

  bool publish(std::string& error) override {
    if (pending_ == nullptr || pending_ == cursor_) return true;
    arenas_.back().published = arenas_.back().sframe.bytes();
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    auto* first = reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(pending_) & ~(page - 1));
    auto* last =
        reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(cursor_) + page - 1) & ~(page - 1));
    if (mprotect(first, static_cast<size_t>(last - first), PROT_READ | PROT_EXEC) != 0) {
      error = std::string("mprotect: ") + std::strerror(errno);
      return false;
    }
    // Later code starts on a fresh page: published pages are never writable again.
    cursor_ = pending_ = last;
    if (cursor_ >= end_) base_ = nullptr;
    return true;
  }

  std::vector<toylang::jit_sframe> sframe_sections() override {
    std::vector<toylang::jit_sframe> out;
    for (const arena& a : arenas_) {
      out.push_back({a.published, a.start, a.start, a.end});
    }
    return out;
  }

 private:
  // The SFrame bytes are kept aside (not in the process for external tools): this placer only
  // serves bring-up and --verify-unwind comparisons.
  struct arena {
    uint64_t start, end;
    jitunwind::sframe::encoder sframe;
    std::vector<uint8_t> published;
  };
  std::vector<arena> arenas_;
  uint8_t* base_ = nullptr;
  uint8_t* cursor_ = nullptr;
  uint8_t* pending_ = nullptr;
  uint8_t* end_ = nullptr;
};

}  // namespace

std::unique_ptr<code_placer> make_mmap_placer() {
  return std::make_unique<mmap_placer>();
}

}  // namespace toyjit
