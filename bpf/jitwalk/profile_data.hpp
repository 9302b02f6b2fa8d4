// A symbolized, aggregated CPU profile: what the writers (folded, SVG, pprof) consume.
#pragma once

#include "jitwalk/symbolizer.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace jitwalk {

struct profile_frame {
  std::string name;
  frame_kind kind = frame_kind::unknown;
  uint64_t address = 0;  ///< the address symbolized (return addresses minus one)
  std::string module;
  uint64_t map_start = 0, map_limit = 0, map_offset = 0;
  std::string build_id;
  name_source source = name_source::none;  ///< not part of the frame's identity
  /// Found by the frame-pointer fallback: the step from the frame below it had no rows and
  /// read [FP + 8]. Right when that code keeps a frame pointer; when it does not, the frames
  /// between were skipped. Part of the frame's identity, marked in every output (fp_mark).
  bool fp_found = false;
  /// Found from the return address at the stack pointer: the frame below it (the interrupted
  /// one) had no rows and [SP] held a return address, taken as a frameless leaf's caller. Right
  /// when that leaf has no frame of its own; when it has one, [SP] can hold a return address
  /// left there by an earlier call. Part of the frame's identity, marked in every output
  /// (sp_mark).
  bool sp_found = false;
};

/// The mark of a frame found by the frame-pointer fallback, appended to its name in folded
/// stacks, SVG flame graphs and pprof function names: the style of the `_[k]` (kernel) and
/// `_[j]` (JIT) annotations of perf's folded stacks, which flamegraph.pl and inferno know.
inline constexpr const char* fp_mark = "_[fp]";
/// The mark of a frame found from the return address at the stack pointer (sp_found).
inline constexpr const char* sp_mark = "_[sp]";
/// The frame's name with its fp_mark or sp_mark, if any.
std::string marked_name(const profile_frame& f);

struct profile_stack {
  std::string thread;            ///< first folded element: process or thread name
  std::vector<uint32_t> frames;  ///< indexes into profile_data::frames(), leaf first
  uint64_t count = 0;
};

class profile_data {
 public:
  /// Frame id for a frame (deduplicated by name, kind, address and module).
  uint32_t intern(const profile_frame& f);
  /// Adds `count` samples of a stack (leaf first); equal stacks are merged.
  void add(const std::string& thread, std::vector<uint32_t> frames_leaf_first, uint64_t count);

  /// Rewrites every frame as `f(id, frame)` says (late names, grouping): frames that become
  /// equal are one frame again, and stacks that become equal are merged (counts added). Returns
  /// the new id of each old id.
  std::vector<uint32_t> rebuild(
      const std::function<profile_frame(uint32_t id, const profile_frame&)>& f);

  const std::vector<profile_frame>& frames() const noexcept { return frames_; }
  /// All stacks, sorted by thread then frames root-first (deterministic output).
  std::vector<profile_stack> stacks() const;
  uint64_t total() const noexcept { return total_; }

  std::string process_name;
  int pid = 0;
  uint64_t period_ns = 0;      ///< CPU time one sample stands for
  uint64_t start_unix_ns = 0;  ///< wall-clock start of the profile
  uint64_t duration_ns = 0;

 private:
  std::vector<profile_frame> frames_;
  std::map<std::tuple<std::string, uint8_t, uint64_t, std::string, bool, bool>, uint32_t> frame_ids_;
  std::map<std::pair<std::string, std::vector<uint32_t>>, uint64_t> counts_;
  uint64_t total_ = 0;
};

/// Folded stacks ("thread;root;...;leaf count" per line), the input format of flamegraph.pl,
/// inferno, speedscope. `io_error` naming the file.
result<void> write_folded(const profile_data& p, const std::string& path);
std::string folded_text(const profile_data& p);

struct svg_options {
  std::string title = "jitwalk CPU profile";
  std::string subtitle;
  unsigned width = 1200;
};
/// A self-contained SVG flame graph (inline CSS and a small inline script for click-to-zoom;
/// readable without the script).
std::string flamegraph_svg(const profile_data& p, const svg_options& o);
result<void> write_svg(const profile_data& p, const svg_options& o, const std::string& path);

/// A pprof profile (profile.proto, gzip-compressed) with sample types samples/count and
/// cpu/nanoseconds.
std::vector<uint8_t> pprof_bytes(const profile_data& p, bool gzip = true);
result<void> write_pprof(const profile_data& p, const std::string& path);

}  // namespace jitwalk
