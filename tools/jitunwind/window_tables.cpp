#include "window_tables.hpp"

#include "cli.hpp"
#include "proc_files.hpp"

#include <algorithm>

namespace jitunwind::cli {

namespace {

// Validates the copied section of `w` in place: sets `table`, or `why`.
void check_window(loaded_window& w, std::optional<abi> required_abi) {
  auto t = sframe::table::create(w.sframe, w.record.sframe_address);
  if (!t) {
    w.why = t.error().message();
    return;
  }
  if (required_abi && t->info().target != *required_abi) {
    w.why = std::string("its SFrame is for ") + to_string(t->info().target) + ", not " +
            to_string(*required_abi);
    return;
  }
  const remote::window_record& r = w.record;
  // The registry entry names the version (writers since SFrame v3; 0: not said): it must be
  // the section's.
  if (r.sframe_version != 0 && r.sframe_version != t->info().version) {
    w.why = "its registry entry says SFrame v" + std::to_string(r.sframe_version) +
            " but the section is v" + std::to_string(t->info().version);
    return;
  }
  const auto [lo, hi] = t->pc_range();
  if (lo != hi && (lo < r.text_start || hi - r.text_start > r.text_size)) {
    w.why = "its functions span " + hex_text(lo) + "-" + hex_text(hi) + ", outside its text " +
            hex_text(r.text_start) + "-" + hex_text(r.text_start + r.text_size);
    return;
  }
  w.table.emplace(std::move(t).value());
}

}  // namespace

result<std::vector<loaded_window>> load_windows(const remote::registry_reader& reader,
                                                std::optional<abi> required_abi, pid_t process,
                                                toolkit::memory_budget* budget,
                                                std::vector<remote::skipped_slot>* skipped) {
  // What a listed window costs beyond its SFrame copy (record, vector slot, table, reason).
  constexpr uint64_t window_overhead = sizeof(loaded_window) + 128;
  // Determined before reading: once the reader's thread has ended, it maps to no process.
  if (process == 0) process = process_of(reader.pid());
  std::vector<loaded_window> out;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto snapshot = reader.read();
    if (!snapshot) return std::move(snapshot).error();
    out.clear();
    // As many as the budget can hold, not as many as the registry claims.
    out.reserve(std::min<size_t>(
        snapshot->windows.size(),
        budget != nullptr ? budget->limit() / window_overhead + 1 : snapshot->windows.size()));
    if (skipped != nullptr) *skipped = snapshot->skipped;
    bool failed = false;
    for (size_t i = 0; i < snapshot->windows.size(); ++i) {
      const remote::window_record& r = snapshot->windows[i];
      auto charge = toolkit::budget_charge::take(budget, window_overhead, "the registry's windows");
      if (!charge) {
        if (skipped != nullptr)
          skipped->push_back({r.registry_address, r.slot,
                              "this window and the " +
                                  std::to_string(snapshot->windows.size() - i - 1) +
                                  " after it not read: " + charge.error().message(),
                              snapshot->windows.size() - i});
        break;
      }
      loaded_window& w = out.emplace_back();
      w.record = r;
      w.charge = std::move(*charge);
      if (r.sframe_size == 0) {
        w.why = "it publishes no SFrame data";
      } else if (auto room =
                     r.sframe_size > remote::read_options{}.max_sframe_size
                         ? result<void>()  // refused by the reader, with its message
                         : w.charge.grow(budget, r.sframe_size,
                                         "the SFrame of window " + std::to_string(r.window_id));
                 !room) {
        w.why = "not read: " + room.error().message();
      } else if (auto b = reader.read_sframe(r)) {
        w.sframe = std::move(b).value();
      } else if (!process_running(process)) {
        return std::move(b).error();  // the process ended: no window is unusable for that
      } else {
        // Only a window that changed meanwhile is worth reading the registry again for; a
        // window whose SFrame cannot be read at all stays so.
        w.why = b.error().message();
        w.changed = b.error().code() == errc::bad_state;
        failed = failed || w.changed;
      }
      if (w.sframe.empty()) w.charge.shrink_to(window_overhead);
    }
    if (!failed) break;
  }
  for (loaded_window& w : out)
    if (w.why.empty()) check_window(w, required_abi);
  return out;
}

}  // namespace jitunwind::cli
