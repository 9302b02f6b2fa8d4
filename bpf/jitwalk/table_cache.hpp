// An on-disk cache of native objects' converted unwind rows, keyed by build ID (as perf's
// build-ID cache keys objects), so that a second run on the same binaries skips parsing their
// .eh_frame / .sframe: node's 75 922 .eh_frame functions cost more than the rest of start-up.
//
// One file per (object, executable part, --native-tables policy), rows stored relative to the
// object's own addresses (no load bias), so a cached table serves every process and ASLR layout.
// Files are treated as hostile: a file is used only if it is a regular file owned by us in a
// directory owned by us and not writable by others, and its header (magic, format version, the
// converting jitwalk binary's build ID, the object's build ID, size, section sizes and
// addresses, policy, part) matches the object and its
// checksum and rows are valid; anything else is ignored and rewritten. Files are written beside
// their final name and renamed over it (a crash leaves no half file under a valid name).
//
// Trade-off: an object is recognised by its build ID, size and unwind sections' sizes and
// addresses, not by the bytes of those sections (reading them is most of what the cache saves).
// Two objects sharing all of these but with different tables would share rows; the linker makes
// build IDs from the contents, so that takes a deliberately forged build ID, and its only victim
// is the walk of the process that maps the forged object.
//
// Not thread-safe (jitwalk's event loop owns it).
#pragma once

#include "jitwalk/elf_file.hpp"
#include "jitwalk/native_tables.hpp"

#include <functional>
#include <optional>
#include <string>

namespace jitwalk {

struct table_cache_stats {
  size_t hits = 0;
  size_t misses = 0;    ///< no file yet (then written)
  size_t rejected = 0;  ///< a file was there but not valid for the object (then rewritten)
  size_t written = 0;
  size_t uncacheable = 0;  ///< objects without a build ID
};

class table_cache {
 public:
  /// $XDG_CACHE_HOME/jitwalk, else $HOME/.cache/jitwalk; empty if neither is set.
  static std::string default_dir();

  /// A cache in `dir` (created, mode 0700, if missing). An unusable directory (not ours,
  /// writable by others, a link) disables the cache with the reason in `problem()`.
  explicit table_cache(std::string dir);

  bool enabled() const noexcept { return enabled_; }
  const std::string& dir() const noexcept { return dir_; }
  const std::string& problem() const noexcept { return problem_; }
  const table_cache_stats& stats() const noexcept { return stats_; }

  /// The table of `obj`'s part mapped at [lo, hi) with load `bias`: from the cache when a valid
  /// entry exists, else made by `build` (build_native_table for these arguments) and stored.
  /// Errors are build's. `*from_cache` tells which.
  result<native_table> get(const elf_file& obj, uint64_t bias, uint64_t lo, uint64_t hi,
                           const native_policy& policy,
                           const std::function<result<native_table>()>& build,
                           bool* from_cache = nullptr);

 private:
  std::string file_name(const std::string& build_id, uint64_t lo, uint64_t hi,
                        const native_policy& policy) const;

  std::string dir_;
  std::string problem_;
  bool enabled_ = false;
  table_cache_stats stats_;
};

/// The cache file format, exposed for tests: serialises `t` (rows relative to the object, i.e.
/// with `bias` removed) with its key, and parses such bytes back (`malformed` naming the
/// field that does not match or is out of bounds).
struct table_cache_key {
  std::string build_id;
  std::string converter;  ///< converter_id()
  uint64_t file_size = 0;
  uint64_t sframe_addr = 0, sframe_size = 0, eh_frame_addr = 0, eh_frame_size = 0;
  uint64_t lo = 0, hi = 0;  ///< the part, in the object's addresses
  uint32_t policy = 0;
};
/// Which jitwalk binary converts (its build ID): cached rows of another binary are not used.
const std::string& converter_id();
table_cache_key cache_key_of(const elf_file& obj, uint64_t bias, uint64_t lo, uint64_t hi,
                             const native_policy& policy);
std::string encode_cached_table(const table_cache_key& key, const native_table& t, uint64_t bias);
result<native_table> decode_cached_table(std::span<const uint8_t> bytes, const table_cache_key& key,
                                         uint64_t bias);

}  // namespace jitwalk
