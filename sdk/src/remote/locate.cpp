// Finding `jitunwind_registry` in another process: every file-backed ELF object in its maps,
// symbol tables searched, link-time value turned into a run-time address.
#include <jitunwind/registry_abi.h>
#include <jitunwind/remote.h>

#include "common/error.hpp"
#include <jitunwind/toolkit/guarded_file.hpp>
#include "remote/elf_symbols.hpp"
#include "remote/proc_maps.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

namespace jitunwind::remote {

using jitunwind::detail::make_error;
using namespace jitunwind::remote::detail;

namespace {

constexpr uint64_t page_mask = ~uint64_t{4095};
// The most read at once from a mapped object (its symbol and string tables): the file is the
// target's; a sparse file claiming a 2 GiB .symtab must not make the reader hold 2 GiB.
constexpr uint64_t max_table_read = uint64_t{64} << 20;

// The first of `candidates` that opens as an ELF object; nothing if none (the object is
// skipped). /proc/PID/map_files links are the kernel's and followed; the other paths are
// whatever the target mapped, so a symbolic link there is not. `opened`: some path could be
// opened (a file that is not ELF was still examined).
std::optional<jitunwind::toolkit::elf_image> open_first(const std::vector<std::string>& candidates,
                                                       bool& opened) {
  opened = false;
  for (size_t i = 0; i < candidates.size(); ++i) {
    jitunwind::toolkit::open_rules rules;
    rules.what = "mapped object";
    rules.no_follow = i != 0;
    rules.max_bytes = UINT64_MAX;  // only headers and symbol tables are read
    auto f = jitunwind::toolkit::guarded_file::open(candidates[i], rules);
    if (!f) continue;
    opened = true;
    if (f->size() < 64) return std::nullopt;
    jitunwind::toolkit::elf_read_limits limits;
    limits.max_read = max_table_read;
    auto img = jitunwind::toolkit::elf_image::open(std::move(*f), limits);
    if (img) return std::move(*img);
    if (img.error().code() != errc::malformed) continue;  // unreadable: try another path
    return std::nullopt;  // not ELF (a font, a locale archive) or corrupt: no other path helps
  }
  return std::nullopt;
}

struct object_key {
  std::string path;
  std::string device;
  uint64_t inode;
  auto operator<=>(const object_key&) const = default;
};

}  // namespace

result<std::vector<registry_location>> locate_registries(pid_t pid) {
  auto maps = read_maps(pid);
  if (!maps) return std::move(maps).error();

  // Group the mappings by file (several segments each).
  std::map<object_key, std::vector<const map_line*>> objects;
  for (const map_line& m : *maps) {
    if (m.inode == 0 || m.path.empty() || m.path[0] != '/') continue;
    objects[{m.path, m.device, m.inode}].push_back(&m);
  }

  std::vector<registry_location> found;
  std::string first_problem;
  size_t examined = 0;
  for (const auto& [key, lines] : objects) {
    const map_line* lowest = *std::min_element(
        lines.begin(), lines.end(), [](auto* a, auto* b) { return a->start < b->start; });
    std::string clean_path = key.path;
    constexpr std::string_view deleted = " (deleted)";
    if (clean_path.size() > deleted.size() &&
        clean_path.compare(clean_path.size() - deleted.size(), deleted.size(), deleted) == 0) {
      clean_path.resize(clean_path.size() - deleted.size());
    }
    char map_files[96];
    std::snprintf(map_files, sizeof(map_files), "/proc/%d/map_files/%llx-%llx",
                  static_cast<int>(pid), static_cast<unsigned long long>(lowest->start),
                  static_cast<unsigned long long>(lowest->end));
    char root[64];
    std::snprintf(root, sizeof(root), "/proc/%d/root", static_cast<int>(pid));
    bool opened = false;
    auto image = open_first({map_files, std::string(root) + clean_path, clean_path}, opened);
    examined += opened;
    if (!image) continue;
    auto match = find_elf_symbol(*image, JITUNWIND_REGISTRY_SYMBOL, key.path);
    if (!match) {
      // Not every mapped file is ELF (locale archives, fonts): only real ELF trouble is noted.
      if (first_problem.empty() && match.error().code() != errc::malformed) {
        first_problem = match.error().message();
      }
      continue;
    }
    if (!match->has_value()) continue;
    const elf_symbol_match& sym = **match;
    if (sym.loads.empty()) continue;
    // Load bias from the lowest PT_LOAD: it is mapped at (bias + vaddr) rounded down to a page,
    // from its file offset rounded down to a page.
    const elf_load_segment& first = *std::min_element(
        sym.loads.begin(), sym.loads.end(),
        [](const elf_load_segment& a, const elf_load_segment& b) { return a.vaddr < b.vaddr; });
    const map_line* base = nullptr;
    for (const map_line* m : lines) {
      if (m->offset == (first.offset & page_mask) && (base == nullptr || m->start < base->start)) {
        base = m;
      }
    }
    if (base == nullptr) continue;
    const uint64_t bias = base->start - (first.vaddr & page_mask);
    registry_location loc;
    loc.address = bias + sym.value;
    loc.object_path = key.path;
    loc.found_in = sym.table;
    if (std::none_of(found.begin(), found.end(),
                     [&](const registry_location& l) { return l.address == loc.address; })) {
      found.push_back(std::move(loc));
    }
  }
  if (found.empty()) {
    std::string msg = jitunwind::detail::format(
        "pid %d: no mapped ELF object defines %s (%zu objects examined; is the jitunwind SDK "
        "loaded, and is a statically linked executable stripped without "
        "-Wl,--export-dynamic-symbol=%s?)",
        pid, JITUNWIND_REGISTRY_SYMBOL, examined, JITUNWIND_REGISTRY_SYMBOL);
    if (!first_problem.empty()) msg += "; first problem: " + first_problem;
    // No file mappings at all (a zombie, a kernel thread) is not a permission problem.
    if (objects.empty()) {
      return make_error(errc::not_found,
                        "pid %d has no file mappings (a zombie or a kernel thread?)", pid);
    }
    if (examined == 0) {
      return make_error(errc::permission_denied,
                        "pid %d: none of its mapped files could be opened (permissions?)", pid);
    }
    return error(errc::not_found, std::move(msg));
  }
  return found;
}

}  // namespace jitunwind::remote
