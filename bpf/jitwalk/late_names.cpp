#include "jitwalk/late_names.hpp"

#include <set>

#include "jitwalk/name_report.hpp"

namespace jitwalk {

profile_frame to_profile_frame(const frame_desc& d, uint64_t pc, bool return_address) {
  profile_frame f;
  f.name = d.name;
  f.kind = d.kind;
  f.address = return_address && pc > 0 ? pc - 1 : pc;
  f.module = d.module;
  f.map_start = d.module_base;
  f.map_limit = d.module_limit;
  f.map_offset = d.module_offset;
  f.build_id = d.build_id;
  f.source = d.source;
  return f;
}

namespace {

// A frame walked at a known publication (the SDK's generations) is named only by a publication
// at or before it: by the end, the code at its address may have been replaced several times,
// and the newest name by time or the last perf map line would be the replacement's. True when
// no such publication names it (the frame then stays unnamed, grouped). A process whose names
// carry no generation (the registry without usdt-events: its rows have generations, its perf
// map lines do not) has no publication to name any frame: its frames are named as when first
// seen (by time, else the perf map), not left unnamed for want of what it never publishes.
bool needs_a_publication(symbolizer& sym, const late_names::pending_frame& pf) {
  if (pf.when.generation == 0 || !sym.names().has_generations()) return false;
  const uint64_t at = pf.return_address && pf.pc > 0 ? pf.pc - 1 : pf.pc;
  const jit_names::entry* e = sym.names().find(at, pf.when);
  return e == nullptr || e->generation == 0;
}

}  // namespace

late_summary late_names::resolve(profile_data& p,
                                 const std::function<symbolizer&(uint32_t tgid)>& sym_of,
                                 bool rename, bool raw_addresses, std::vector<uint32_t>* new_ids) {
  late_summary ls;
  ls.pending = pending_.size();
  if (rename) {
    // Everything appended to the perf maps and jitdumps by now (a process that is gone still
    // answers from its last known mappings and the files on disk).
    std::set<uint32_t> refreshed;
    for (const auto& [id, f] : pending_)
      if (refreshed.insert(f.tgid).second) sym_of(f.tgid).refresh();
  }
  auto ids = p.rebuild([&](uint32_t id, const profile_frame& f) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return f;
    const pending_frame& pf = it->second;
    if (rename && !needs_a_publication(sym_of(pf.tgid), pf)) {
      frame_desc d = sym_of(pf.tgid).user_frame(pf.pc, pf.return_address, pf.when);
      if (d.kind != frame_kind::unknown) {
        ++ls.named;
        profile_frame named = to_profile_frame(d, pf.pc, pf.return_address);
        named.fp_found = f.fp_found;
        named.sp_found = f.sp_found;
        return named;
      }
    }
    if (raw_addresses) return f;
    ++ls.grouped;
    profile_frame g = f;
    g.name = mapping_group_name(pf.first.module, pf.first.module_base, pf.first.module_limit);
    g.address = pf.first.module_base;  // one frame per mapping
    return g;
  });
  pending_.clear();
  if (new_ids) *new_ids = std::move(ids);
  return ls;
}

}  // namespace jitwalk
