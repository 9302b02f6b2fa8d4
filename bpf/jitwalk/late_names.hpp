// Late symbolization: frames left unnamed when first seen are kept raw (PC, whether a return
// address, which code they were walked with, when they were seen, whose process) and named at
// the end of the profile, when the runtime has written all it will write (V8's --perf-prof
// jitdump goes through a stdio buffer: most names arrive long after the code ran). What is
// still unnamed then is grouped by mapping.
#pragma once

#include "jitwalk/profile_data.hpp"
#include "jitwalk/symbolizer.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace jitwalk {

/// What late_names::resolve() did.
struct late_summary {
  uint64_t pending = 0;  ///< distinct frames unnamed when first seen
  uint64_t named = 0;    ///< of them, named at the end
  uint64_t grouped = 0;  ///< unnamed frames folded into one frame per mapping
};

class late_names {
 public:
  struct pending_frame {
    uint32_t tgid = 0;  ///< whose names and mappings apply
    uint64_t pc = 0;
    bool return_address = false;
    jit_when when;     ///< when.before: at most the time the frame was first seen
    frame_desc first;  ///< what the symbolizer said then (the mapping, for grouping)
  };

  /// Remembers profile frame `id` (first one wins: equal raw frames are one frame).
  void add(uint32_t id, pending_frame p) { pending_.emplace(id, std::move(p)); }
  bool has(uint32_t id) const { return pending_.count(id) != 0; }
  size_t size() const noexcept { return pending_.size(); }

  /// Names the pending frames of `p` with the symbolizer of their process (`refresh()`ed first
  /// to read the rest of its perf map and jitdump), when `rename`; groups the rest by mapping
  /// unless `raw_addresses`. Equal frames and stacks merge (profile_data::rebuild); `new_ids`
  /// (may be null) gets the new id of every old id. Nothing is pending afterwards.
  late_summary resolve(profile_data& p, const std::function<symbolizer&(uint32_t tgid)>& sym_of,
                       bool rename, bool raw_addresses, std::vector<uint32_t>* new_ids = nullptr);

 private:
  std::map<uint32_t, pending_frame> pending_;  // by profile frame id
};

/// The profile frame of a symbolized user PC.
profile_frame to_profile_frame(const frame_desc& d, uint64_t pc, bool return_address);

}  // namespace jitwalk
