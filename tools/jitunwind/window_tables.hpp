// A process's published code windows as a profiler sees them: one consistent registry
// snapshot, each window's SFrame section copied out of the process and checked. Shared by
// `unwind check` (which unwinds with the tables) and `windows list/watch` (which shows them).
#pragma once

#include <jitunwind/remote.h>
#include <jitunwind/sframe.h>

#include <jitunwind/toolkit/budget.hpp>

#include <optional>
#include <string>
#include <vector>

namespace jitunwind::cli {

struct loaded_window {
  remote::window_record record;
  std::vector<uint8_t> sframe;  ///< the copied section (empty if none or unreadable)
  /// The validated table over `sframe`'s heap buffer: a loaded_window may be moved (also inside
  /// a vector), never copied. Set exactly when `why` is empty.
  std::optional<sframe::table> table;
  std::string why;  ///< why a profiler cannot use the window; empty if it can
  /// The window changed (republished or freed) during every copy of its SFrame: `why` says so.
  /// Under heavy churn this is the process moving on, not a defect of the window.
  bool changed = false;
  /// What the window holds of the run's memory budget (its SFrame copy and its record).
  toolkit::budget_charge charge;

  loaded_window() = default;
  loaded_window(loaded_window&&) = default;
  loaded_window& operator=(loaded_window&&) = default;
  loaded_window(const loaded_window&) = delete;
  loaded_window& operator=(const loaded_window&) = delete;
};

/// Reads the registry once and copies every listed window's SFrame. A window can change while
/// its SFrame is copied (the process republishes or frees it): then the whole registry is read
/// again, up to three times; a copy that still fails makes that window unusable (`changed` if
/// the window kept changing). A window is
/// also unusable without SFrame, with SFrame that does not validate, for another ABI than
/// `required_abi` (if given), or with functions outside its text (those rows would describe
/// whatever code lives there). A copy that fails because process `process` (0: the reader's
/// thread's) has ended is an error, not an unusable window. Errors: the registry reads' (see
/// remote.h).
///
/// What the process controls is bounded: each window and its SFrame copy are charged to
/// `budget` (if given) while they live; a window whose SFrame does not fit is unusable ("not
/// read: memory budget ..."), and once not even a window's record fits, the windows after it are
/// not loaded and one entry in `skipped` says how many. Registry entries the reader skipped
/// (remote::registry_snapshot::skipped) go to `skipped` too.
result<std::vector<loaded_window>> load_windows(
    const remote::registry_reader& reader, std::optional<abi> required_abi, pid_t process = 0,
    toolkit::memory_budget* budget = nullptr, std::vector<remote::skipped_slot>* skipped = nullptr);

}  // namespace jitunwind::cli
