#include "jitwalk/ehframe.hpp"

#include <jitunwind/cfi.h>

#include <algorithm>
#include <map>

namespace jitwalk {
namespace {

namespace cfi = jitunwind::cfi;

constexpr size_t max_problems = 8;

// What the decoder made of one FDE: the pieces it could express and the holes between them, in
// address order.
struct fde_parts {
  std::vector<const jitunwind::function_desc*> pieces;
  std::vector<const cfi::left_out_function*> holes;
};

// One walker function per FDE: the pieces' rows, a gap row at each hole. A PCMASK piece (the
// lazy PLT's entries) stays a function of its own.
void add_fde(const fde_parts& parts, eh_frame_result& out) {
  struct part {
    uint64_t start, end;
    const jitunwind::function_desc* piece;  // null: a hole
  };
  std::vector<part> order;
  for (const auto* p : parts.pieces) {
    if (p->pcmask_rep != 0) {
      if (auto f = from_frame_model(*p, table_source::eh_frame)) out.functions.push_back(*f);
      continue;
    }
    order.push_back({p->start, p->start + p->size, p});
  }
  for (const auto* h : parts.holes) order.push_back({h->start, h->start + h->size, nullptr});
  if (order.empty()) return;
  std::sort(order.begin(), order.end(),
            [](const part& a, const part& b) { return a.start < b.start; });
  unwind_function f;
  f.start = order.front().start;
  f.size = static_cast<uint32_t>(order.back().end - f.start);
  f.source = table_source::eh_frame;
  for (const part& p : order) {
    const auto at = static_cast<uint32_t>(p.start - f.start);
    if (p.piece == nullptr) {
      unwind_row gap;
      gap.pc_off = at;
      gap.kind = rule::gap;
      gap.cfa_off = 0;
      f.rows.push_back(gap);
      continue;
    }
    auto rows = from_frame_model(*p.piece, table_source::eh_frame);
    if (!rows) continue;  // the decoder's pieces are well-formed; nothing to add otherwise
    for (unwind_row r : rows->rows) {
      r.pc_off += at;
      f.rows.push_back(r);
    }
  }
  out.functions.push_back(std::move(f));
}

}  // namespace

result<eh_frame_result> parse_eh_frame(std::span<const uint8_t> section, uint64_t section_vaddr) {
  cfi::decoder_options o;
  o.target = jitunwind::abi::amd64;
  o.kind = cfi::section_kind::eh_frame;
  o.section_address = section_vaddr;
  o.partial = cfi::partial_input::usable_rows;
  auto d = cfi::decode(section, o);
  if (!d) return make_error(errc::malformed, "eh_frame: nothing readable (%s)",
                            d.error().message().c_str());
  eh_frame_result out;
  out.fdes = d->fde_count;
  std::map<uint32_t, fde_parts> by_fde;
  for (size_t i = 0; i < d->functions.size(); ++i)
    by_fde[d->fde_offsets[i]].pieces.push_back(&d->functions[i]);
  for (const cfi::left_out_function& l : d->left_out) {
    if (l.part) {
      by_fde[l.fde_offset].holes.push_back(&l);
      continue;
    }
    // An FDE that covers no code describes nothing: no loss.
    if (l.size == 0 && l.reason.ends_with("empty address range")) continue;
    ++out.skipped;
    if (out.problems.size() < max_problems) out.problems.push_back(l.reason);
  }
  for (const auto& [offset, parts] : by_fde) add_fde(parts, out);
  if (out.fdes == 0 && out.skipped > 0)
    return make_error(errc::malformed, "eh_frame: nothing readable (%s)",
                      out.problems.front().c_str());
  return out;
}

}  // namespace jitwalk
