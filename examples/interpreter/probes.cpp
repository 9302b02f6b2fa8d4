// The toyinterp probes as a dynamic USDT provider (jitunwind/usdt.h): generated and loaded at
// start-up, found by tracers in /proc/PID/maps (`bpftrace -p PID -e 'usdt:*:toyinterp:...'`).
#include "probes.h"

#include "usdt_support.h"

#include <algorithm>

namespace toyinterp {

namespace {

using jitunwind::usdt::arg_type;

// The semaphores' memory read as one 64-bit word; may_alias: the SDK declares them 16-bit.
using aliasing_word = uint64_t __attribute__((may_alias));
const aliasing_word always_maybe = ~uint64_t{0};

// The aligned word made of exactly these semaphores, or `always_maybe`. An aligned word never
// crosses a page, so reading it is as safe as reading the semaphores.
const uint64_t* word_of(std::initializer_list<const volatile uint16_t*> semaphores) {
  const uintptr_t word = reinterpret_cast<uintptr_t>(*semaphores.begin()) & ~uintptr_t{7};
  unsigned covered = 0;  // bit k: byte k of the word belongs to one of the semaphores
  for (const volatile uint16_t* s : semaphores) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(s);
    if (s == nullptr || a % 2 != 0 || (a & ~uintptr_t{7}) != word) return &always_maybe;
    covered |= 3u << (a - word);
  }
  if (covered != 0xff) return &always_maybe;
  return reinterpret_cast<const aliasing_word*>(word);
}

class dynamic_probes final : public probes {
 public:
  explicit dynamic_probes(jitunwind::usdt::provider p) : provider_(std::move(p)) {}

  bool init(std::string& error) {
    auto add = [&](const char* name, std::initializer_list<arg_type> args,
                   jitunwind::usdt::probe& out) {
      auto r = provider_.add_probe(name, args);
      if (!r) {
        error = r.error().message();
        return false;
      }
      out = *r;
      return true;
    };
    if (!add("function__entry", {arg_type::string, arg_type::i64}, entry_) ||
        !add("function__return", {arg_type::string, arg_type::i64}, return_) ||
        !add("line", {arg_type::string, arg_type::i64}, line_)) {
      return false;
    }
    auto cp = provider_.add_probe("checkpoint", toylang::checkpoint_args);
    if (!cp) {
      error = cp.error().message();
      return false;
    }
    checkpoint_ = *cp;
    if (auto r = provider_.load(); !r) {
      error = r.error().message();
      return false;
    }
    entry_semaphore_ = entry_.semaphore_address();
    return_semaphore_ = return_.semaphore_address();
    line_semaphore_ = line_.semaphore_address();
    any_enabled_word_ = word_of(
        {entry_semaphore_, return_semaphore_, line_semaphore_, checkpoint_.semaphore_address()});
    return true;
  }

  void function_entry(const char* name, int64_t depth) override { entry_.fire(name, depth); }
  void function_return(const char* name, int64_t depth) override { return_.fire(name, depth); }
  void line(const char* name, int64_t line) override { line_.fire(name, line); }
  void checkpoint(int64_t tag, std::span<const uint64_t> addrs) override {
    toylang::fire_checkpoint(checkpoint_, tag, addrs);
  }
  bool wait_for_tracer(std::chrono::seconds timeout,
                       const std::vector<std::string>& all_of) override {
    const jitunwind::usdt::probe all[] = {entry_, return_, line_, checkpoint_};
    if (all_of.empty()) return toylang::wait_for_tracer("toy-interp", provider_, all, timeout);
    std::vector<jitunwind::usdt::probe> named;
    for (const auto& p : all) {
      if (std::find(all_of.begin(), all_of.end(), p.name()) != all_of.end()) named.push_back(p);
    }
    return toylang::wait_for_tracer("toy-interp", provider_, named, timeout, true);
  }
  std::string describe() const override {
    return "dynamic USDT provider toyinterp in " + provider_.object_path();
  }

 private:
  jitunwind::usdt::provider provider_;
  jitunwind::usdt::probe entry_, return_, line_, checkpoint_;
};

}  // namespace

bool probes::one_word_check() const {
  return any_enabled_word_ != &always_maybe;
}

std::unique_ptr<probes> probes::create(std::string& error) {
  auto p = jitunwind::usdt::provider::create("toyinterp");
  if (!p) {
    error = p.error().message();
    return nullptr;
  }
  auto out = std::make_unique<dynamic_probes>(std::move(*p));
  if (!out->init(error)) return nullptr;
  return out;
}

}  // namespace toyinterp
