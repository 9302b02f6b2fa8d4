// Toolkit: the one rule for every limit a tool applies to its input (docs/cli.md and
// docs/jitwalk.md, "When a limit cuts the input").
//
// The limits (the memory budget of budget.hpp, the most read from one file, the ELF reader's
// cap on the names of one string table, a row cap, ...) exist so that a hostile input cannot
// exhaust the tool; they are not allowed to make the answer silently poorer. When one refuses
// part of the input and the tool goes on with the rest, the tool
//   - prints one warning on stderr naming what was left out and why ("warning: symbol table
//     .symtab of ./a.out left out: elf: section 27: names add up to ..."), and
//   - ends with exit status `exit_input_cut` (3) instead of 0: the output is right for what it
//     covers, and a script can tell that it does not cover everything.
// Exit statuses 1 (failure) and 2 (usage) keep their meaning and win over 3.
//
// Thread-safety: `input_cuts` may be shared by threads.
#pragma once

#include <jitunwind/result.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>

namespace jitunwind::toolkit {

/// Exit status of a run whose output leaves out what a limit refused.
inline constexpr int exit_input_cut = 3;

/// A limit's refusal (as opposed to input that is malformed or absent).
inline bool is_limit(const error& e) noexcept {
  return e.code() == errc::limit_exceeded;
}

/// What the limits refused during one run.
class input_cuts {
 public:
  input_cuts() = default;
  input_cuts(const input_cuts& o) noexcept : count_(o.count()) {}
  input_cuts& operator=(const input_cuts& o) noexcept {
    count_.store(o.count(), std::memory_order_relaxed);
    return *this;
  }

  /// Records that `what` was left out because of `why` (the limit's message) and returns the
  /// warning to print: "WHAT left out: WHY".
  std::string add(std::string_view what, std::string_view why);
  size_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  /// `status` unless it is 0 and something was cut: then exit_input_cut.
  int exit_status(int status) const noexcept {
    return status == 0 && count() != 0 ? exit_input_cut : status;
  }

 private:
  std::atomic<size_t> count_{0};
};

}  // namespace jitunwind::toolkit
