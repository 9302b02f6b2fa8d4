// Code placement in SDK code windows: what a real runtime does with jitunwind.
//
// Functions go into the current owned window in address order (the window's SFrame grows with
// them); a full window is sealed and a fresh one opened (--windows=SIZE). Recompiled code goes
// into the current window too, and is appended with `moved_from` = its previous address (jitdump
// CODE_MOVE). A window whose functions have all been replaced holds dead code; it is retired
// once no return address into it is left on the stack (a conservative scan at the recompile
// safe point), then after a grace period either kept for reuse (same range, new generation) or
// freed.
#include "placer.h"

#include <jitunwind/window.h>

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <list>
#include <utility>
#include <vector>

namespace toyjit {

namespace {

using namespace jitunwind;

constexpr std::chrono::milliseconds retire_grace{10};
constexpr size_t max_kept_windows = 2;
constexpr uint32_t max_poll_backoff = 1024;

class sdk_placer final : public code_placer {
 public:
  sdk_placer(std::unique_ptr<session> s, const placer_options& o)
      : session_(std::move(s)), options_(o) {
    pthread_attr_t attr;
    void* base = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      if (pthread_attr_getstack(&attr, &base, &size) == 0) {
        stack_high_ = reinterpret_cast<uint64_t>(base) + size;
      }
      pthread_attr_destroy(&attr);
    }
  }

  ~sdk_placer() override {
    // The session retires and frees every window when destroyed.
  }

  bool place(const std::string& name, generated_function& g, const placed_function* replaces,
             placed_function& out, std::string& error) override {
    if (g.size() > options_.window_size) {
      error = "function '" + name + "' (" + std::to_string(g.size()) +
              " bytes) does not fit in a code window of " + std::to_string(options_.window_size) +
              " bytes (--windows)";
      return false;
    }
    result<window::code_space> space = jitunwind::error(errc::bad_state, "no open window");
    if (current_ != nullptr) space = current_->w->allocate(g.size(), 16);
    if (!space) {
      if (current_ != nullptr && space.error().code() != errc::limit_exceeded) {
        error = "allocating " + std::to_string(g.size()) + " bytes in window " +
                std::to_string(current_->w->id()) + ": " + space.error().message();
        return false;
      }
      if (!open_window(error)) return false;
      space = current_->w->allocate(g.size(), 16);
      if (!space) {
        error = "allocating in a fresh window: " + space.error().message();
        return false;
      }
    }
    // asmjit's relocation and copy belong to compilation, not to publication (--stats).
    const auto t0 = std::chrono::steady_clock::now();
    auto frames = g.place(space->address, space->writable);
    out.place_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    if (!frames) {
      error = frames.error().message();
      return false;
    }
    const uint64_t moved_from = replaces != nullptr ? replaces->start : 0;
    if (auto r = current_->w->append(name, *frames, moved_from); !r) {
      error = "appending '" + name + "' to window " + std::to_string(current_->w->id()) + ": " +
              r.error().message();
      return false;
    }
    ++current_->live;
    if (replaces != nullptr) {
      if (tracked* old = find(replaces->start)) {
        --old->live;
      }
    }
    out.name = name;
    out.start = space->address;
    out.size = g.size();
    out.frames = std::move(*frames);
    return true;
  }

  bool publish(std::string& error) override {
    if (current_ == nullptr) return true;
    if (auto r = current_->w->publish(); !r) {
      error = "publishing window " + std::to_string(current_->w->id()) + ": " + r.error().message();
      return false;
    }
    return true;
  }

  void poll() override {
    // Retire windows whose code is all replaced and no longer on the stack. The stack scan
    // costs O(stack depth): a deep recursion that keeps recompiling would rescan the same deep
    // stack on every poll (quadratic time), so after a scan that retires nothing the next one
    // waits twice as many polls, up to max_poll_backoff.
    if (polls_to_skip_ > 0) {
      --polls_to_skip_;
    } else {
      std::vector<tracked*> candidates;
      for (tracked& t : windows_) {
        if (!t.retired && t.live == 0 && &t != current_) candidates.push_back(&t);
      }
      const std::vector<bool> on_stack = referenced_from_stack(candidates);
      bool retired_any = false;
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (on_stack[i]) continue;
        tracked& t = *candidates[i];
        const bool ok =
            t.w->retire(retire_grace,
                        [this](window& w) {
                          // Keep a few windows for reuse instead of mapping new ones
                          // (not when the session never reuses addresses).
                          if (!session_->recycles_addresses() || kept_.size() >= max_kept_windows)
                            return false;
                          kept_.push_back(&w);
                          return true;
                        })
                .ok();
        if (ok) {
          t.retired = true;
          retired_any = true;
          ++retired_;
        }
      }
      backoff_ = retired_any || candidates.empty()
                     ? 0
                     : std::min(max_poll_backoff, backoff_ == 0 ? 1 : 2 * backoff_);
      polls_to_skip_ = backoff_;
    }
    session_->poll();
    // Forget windows the session freed (retired and not kept), and end their handles: a
    // runtime that recompiles for days must not keep one per window it ever had.
    windows_.remove_if([this](const tracked& t) {
      if (!t.retired || t.w->state() != window_state::freed) return false;
      (void)session_->release(t.w);
      return true;
    });
  }

  std::vector<toylang::jit_sframe> sframe_sections() override {
    std::vector<toylang::jit_sframe> out;
    for (const tracked& t : windows_) {
      if (t.retired) continue;
      const auto bytes = t.w->published_sframe();
      if (bytes.empty()) continue;
      out.push_back({bytes, reinterpret_cast<uint64_t>(bytes.data()), t.w->text_start(),
                     t.w->text_start() + t.w->text_size()});
    }
    return out;
  }

  std::string describe() const override {
    std::string s;
    for (const auto& st : session_->status()) {
      if (st.state == publisher_state::disabled) continue;
      s += std::string(to_string(st.which)) + "=" + to_string(st.state);
      if (!st.message.empty()) s += " (" + st.message + ")";
      s += "; ";
    }
    const auto live = std::count_if(windows_.begin(), windows_.end(),
                                    [](const tracked& t) { return !t.retired; });
    return s + std::to_string(live) + " live windows, " + std::to_string(retired_) + " retired, " +
           std::to_string(reused_) + " reused";
  }

 private:
  struct tracked {
    window* w = nullptr;
    uint32_t live = 0;  // functions whose current code is in this window
    bool retired = false;
  };

  tracked* find(uint64_t address) {
    for (tracked& t : windows_) {
      if (!t.retired && address >= t.w->text_start() &&
          address < t.w->text_start() + t.w->text_size()) {
        return &t;
      }
    }
    return nullptr;
  }

  bool open_window(std::string& error) {
    if (current_ != nullptr) {
      if (auto r = current_->w->seal(); !r) {
        error = "sealing window " + std::to_string(current_->w->id()) + ": " + r.error().message();
        return false;
      }
    }
    window* w = nullptr;
    if (!kept_.empty()) {
      w = kept_.back();
      kept_.pop_back();
      if (auto r = w->reuse(); !r) {
        error = "reusing window " + std::to_string(w->id()) + ": " + r.error().message();
        return false;
      }
      ++reused_;
      // The window is open again: track it anew (its old entry is retired).
      windows_.remove_if([&](const tracked& t) { return t.w == w; });
    } else {
      owned_window_options wo;
      wo.code_capacity = options_.window_size;
      auto created = session_->create_owned_window(wo);
      if (!created) {
        error = "creating a code window of " + std::to_string(options_.window_size) +
                " bytes: " + created.error().message();
        return false;
      }
      w = *created;
    }
    windows_.push_back({w, 0, false});
    current_ = &windows_.back();
    return true;
  }

  // AArch64 pointer authentication (--pauth) stores return addresses with a signature in the
  // bits above the 48-bit user address space: the scan compares them without it (as the SDK's
  // unwinder does). Other words that merely look like addresses only delay a retirement.
  static uint64_t strip_signature(uint64_t word) {
#if defined(__aarch64__)
    return word & ((uint64_t{1} << 48) - 1);
#else
    return word;
#endif
  }

  // Conservative: any word on the stack between here and the stack's top that points into a
  // window counts as a live return address (false positives only delay retirement). One pass
  // over the stack for all windows: result[i] is whether windows[i] is referenced. The scan reads
  // every stack word, redzones included, so it is not instrumented by ASan (as a conservative
  // garbage collector's stack scan is not); noinline keeps it out of instrumented callers.
  __attribute__((no_sanitize_address, noinline)) std::vector<bool> referenced_from_stack(
      const std::vector<tracked*>& windows) const {
    std::vector<bool> result(windows.size(), false);
    if (windows.empty()) return result;
    std::vector<std::pair<uint64_t, size_t>> starts;  // (text start, index), sorted
    for (size_t i = 0; i < windows.size(); ++i) starts.push_back({windows[i]->w->text_start(), i});
    std::sort(starts.begin(), starts.end());
    const auto* low = static_cast<const uint64_t*>(__builtin_frame_address(0));
    const auto* high = reinterpret_cast<const uint64_t*>(stack_high_);
    for (const uint64_t* p = low; p < high; ++p) {
      const uint64_t v = strip_signature(*p);
      if (v < starts.front().first) continue;
      auto it = std::upper_bound(starts.begin(), starts.end(),
                                 std::make_pair(v, std::numeric_limits<size_t>::max()));
      const size_t i = std::prev(it)->second;
      if (v - windows[i]->w->text_start() < windows[i]->w->text_size()) result[i] = true;
    }
    return result;
  }

  std::unique_ptr<session> session_;
  placer_options options_;
  std::list<tracked> windows_;  // stable addresses: current_ points into it
  tracked* current_ = nullptr;
  std::vector<window*> kept_;
  uint64_t stack_high_ = 0;
  uint32_t backoff_ = 0;        // polls skipped after the last scan that retired nothing
  uint32_t polls_to_skip_ = 0;  // before the next scan
  uint64_t retired_ = 0;
  uint64_t reused_ = 0;
};

}  // namespace

std::unique_ptr<code_placer> make_sdk_placer(const placer_options& options, std::string& error) {
  auto session_options = jitunwind::session_options::from_env();
  if (!session_options) {
    error = session_options.error().message();
    return nullptr;
  }
  if (options.publishers) session_options->publishers = *options.publishers;
  session_options->log = options.log;
  auto s = jitunwind::session::create(*session_options);
  if (!s) {
    error = s.error().message();
    return nullptr;
  }
  return std::make_unique<sdk_placer>(std::move(*s), options);
}

}  // namespace toyjit
