// Turns addresses of the target into names: JIT names (jit_names), ELF symbols of mapped
// objects, kernel symbols (/proc/kallsyms). Keeps what it learned when the process exits, so
// stacks drained after the exit are still named.
#pragma once

#include "jitwalk/elf_file.hpp"
#include "jitwalk/jit_names.hpp"
#include "jitwalk/proc.hpp"

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace jitwalk {

enum class frame_kind : uint8_t { native, jit, kernel, unknown };
const char* to_string(frame_kind k) noexcept;

/// Where a frame's name came from (the name-source report, name_report.hpp).
enum class name_source : uint8_t {
  none,      ///< unnamed ("[unknown 0x...]", "module+0x...", a mapping group)
  registry,  ///< the SDK's code_add events (jitunwind registry windows)
  jitdump,   ///< a jitdump's CODE_LOAD / CODE_MOVE record
  perf_map,  ///< a /tmp/perf-PID.map line
  elf,       ///< a symbol of an ELF object (or the vDSO)
};
const char* to_string(name_source s) noexcept;

struct frame_desc {
  std::string name;          ///< function name (demangled), or "[unknown 0x...]" / "module+0x..."
  std::string module;        ///< object path, "[jit]", "[kernel]", or ""
  uint64_t module_base = 0;  ///< start of the module's mapping (pprof Mapping)
  uint64_t module_limit = 0;
  uint64_t module_offset = 0;  ///< file offset of the first mapped byte
  std::string build_id;
  frame_kind kind = frame_kind::unknown;
  name_source source = name_source::none;
  bool has_symbol = false;
};

/// What the target's files may cost the symbolizer (docs/jitwalk.md, "Reading hostile
/// processes").
/// ELF objects by (device, inode) as /proc/PID/maps shows them, shared by the symbolizers of a
/// run: the 16 workers of a server map one node binary, read (and its symbols held) once.
using shared_objects = std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<elf_file>>;

struct symbolizer_limits {
  jitunwind::toolkit::memory_budget* budget = nullptr;  ///< ELF sections, symbols, JIT names
  uint64_t max_file_bytes = uint64_t{512} << 20;       ///< per perf map / jitdump; per ELF section
  shared_objects* objects = nullptr;                   ///< null: each symbolizer opens its own
};

class symbolizer {
 public:
  explicit symbolizer(pid_t pid, const symbolizer_limits& limits = {});

  /// Re-reads /proc/PID/maps and the perf map / jitdump files (incrementally). When the process
  /// is gone the last known state is kept.
  void refresh();
  jit_names& names() noexcept { return names_; }

  /// Symbolizes a user PC. `return_address`: PC is a return address (look up PC - 1).
  /// `before`: for JIT code, only names published before this time (ns) qualify.
  frame_desc user_frame(uint64_t pc, bool return_address, uint64_t before = UINT64_MAX);
  /// The same, JIT code named by the code `when` says was at the PC (jit_names::find).
  frame_desc user_frame(uint64_t pc, bool return_address, const jit_when& when);
  frame_desc kernel_frame(uint64_t pc);

  const std::vector<mapping>& mappings() const noexcept { return maps_; }
  /// The target's namespaces and root, where its perf map and jitdumps are looked up.
  const process_view& view() const noexcept { return view_; }
  /// The mapping containing pc in the last known state, or null.
  const mapping* find_mapping(uint64_t pc) const;
  /// The ELF object behind a file-backed mapping (opened through /proc/PID/map_files while the
  /// process lives), cached by device and inode; null if it cannot be opened (said once, with
  /// the reason, unless it is simply not ELF).
  std::shared_ptr<elf_file> object_for(const mapping& m);

 private:
  void load_kallsyms();
  /// Whether a function (a JIT name as `when` says, an ELF symbol) starts exactly at `pc`.
  bool starts_function(uint64_t pc, const jit_when& when);
  /// Whether the target's bytes before `pc` end with a call instruction (true when they cannot
  /// be read: the process is gone).
  bool after_call(uint64_t pc);
  /// The target's [vDSO] as an ELF object (copied from its memory once), or null.
  std::shared_ptr<elf_file> vdso_for(const mapping& m);

  pid_t pid_;
  symbolizer_limits limits_;
  process_view view_;
  std::vector<mapping> maps_;  // sorted by start
  std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<elf_file>> objects_;
  std::map<std::pair<uint64_t, uint64_t>, bool> failed_;
  jit_names names_;
  std::string perf_map_path_;
  std::vector<std::string> jitdump_paths_;
  std::vector<uint8_t> vdso_bytes_;  // the copy vdso_ parses (never resized once parsed)
  std::shared_ptr<elf_file> vdso_;
  bool vdso_tried_ = false;
  bool kallsyms_loaded_ = false;
  std::vector<std::pair<uint64_t, std::string>> kallsyms_;
};

/// Demangles C++ names; anything else is returned unchanged.
std::string demangle(const std::string& name);

}  // namespace jitwalk
