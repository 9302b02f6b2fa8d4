#include "jitwalk/rows.hpp"

#include <algorithm>
#include <cstdint>

namespace jitwalk {

const char* to_string(table_source s) noexcept {
  switch (s) {
    case table_source::sframe:
      return "sframe";
    case table_source::eh_frame:
      return "eh_frame";
    case table_source::jit:
      return "jit";
  }
  return "?";
}

namespace {

// The walker's form of one AMD64 row of the frame model.
unwind_row walker_row(const jitunwind::frame_row& r) {
  using jitunwind::cfa_base;
  using jitunwind::fp_rule;
  using jitunwind::ra_rule;
  unwind_row row;
  row.pc_off = r.pc_offset;
  row.cfa_off = 0;
  const auto regs = jitunwind::dwarf_registers(jitunwind::abi::amd64);
  if (r.ra == ra_rule::undefined) {
    row.kind = rule::outermost;
    return row;
  }
  const bool ra_other_register = r.ra == ra_rule::register_value || r.ra == ra_rule::register_saved;
  const bool fp_other_register =
      r.fp == fp_rule::register_value ||
      (r.fp == fp_rule::register_saved && r.fp_reg != regs.fp && r.fp_reg != regs.sp);
  if (r.cfa == cfa_base::reg || ra_other_register || fp_other_register) {
    row.kind = rule::unsupported;  // needs a register the walk does not carry
    return row;
  }
  if (r.ra != ra_rule::saved || r.ra_mangled || r.ra_offset < INT16_MIN ||
      r.ra_offset > INT16_MAX) {
    row.kind = rule::gap;  // not an AMD64 rule: let the frame pointer try
    return row;
  }
  row.kind = r.cfa == cfa_base::sp ? rule::cfa_sp : rule::cfa_fp;
  row.cfa_off = r.cfa_offset;
  row.cfa_deref = r.cfa_deref;
  row.ra_off = static_cast<int16_t>(r.ra_offset);
  row.fp_saved = r.fp == fp_rule::saved || r.fp == fp_rule::register_saved;
  row.fp_off = row.fp_saved ? r.fp_offset : 0;
  if (r.fp == fp_rule::register_saved)
    row.fp_from = r.fp_reg == regs.fp ? fp_base::fp : fp_base::sp;
  return row;
}

}  // namespace

result<unwind_function> from_frame_model(const jitunwind::function_desc& f, table_source source) {
  if (f.size == 0) {
    return make_error(errc::invalid_argument, "function at %s: size 0", hex(f.start).c_str());
  }
  unwind_function out;
  out.start = f.start;
  out.size = f.size;
  out.pcmask_rep = f.pcmask_rep;
  out.source = source;
  if (f.rows.empty()) {
    // SFrame v3: a DEFAULT FDE without FREs is an outermost frame. (Before v3 the decoder
    // gives no such function: a v1/v2 FDE without FREs says nothing, see sframe_functions.)
    unwind_row row;
    row.kind = rule::outermost;
    row.cfa_off = 0;
    out.rows.push_back(row);
    return out;
  }
  if (f.rows.front().pc_offset != 0) {
    return make_error(errc::invalid_argument, "function at %s: rows must start at offset 0",
                      hex(f.start).c_str());
  }
  const uint32_t span = f.pcmask_rep ? f.pcmask_rep : f.size;
  out.rows.reserve(f.rows.size());
  for (size_t i = 0; i < f.rows.size(); ++i) {
    const jitunwind::frame_row& r = f.rows[i];
    if (i > 0 && r.pc_offset <= f.rows[i - 1].pc_offset) {
      return make_error(errc::invalid_argument,
                        "function at %s: row %zu offset %u not after row %zu offset %u",
                        hex(f.start).c_str(), i, r.pc_offset, i - 1, f.rows[i - 1].pc_offset);
    }
    if (r.pc_offset >= span) {
      return make_error(errc::invalid_argument,
                        "function at %s: row %zu offset %u past the function end (%u bytes)",
                        hex(f.start).c_str(), i, r.pc_offset, span);
    }
    out.rows.push_back(walker_row(r));
  }
  return out;
}

namespace {

jw_row to_bpf(const unwind_row& r, uint32_t pc_off, table_source source) {
  jw_row b{};
  b.pc_off = pc_off;
  b.kind = static_cast<uint8_t>(r.kind);
  if (source == table_source::eh_frame && r.kind != rule::gap) b.flags |= JW_ROW_FROM_EH_FRAME;
  if (r.kind == rule::cfa_sp || r.kind == rule::cfa_fp) {
    b.cfa_off = r.cfa_off;
    if (r.cfa_deref) b.flags |= JW_ROW_CFA_DEREF;
    if (r.ra_off != -8) {
      b.flags |= JW_ROW_RA_OFF;
      b.ra_off = r.ra_off;
    }
    if (r.fp_saved) {
      b.flags |= JW_ROW_FP_SAVED;
      b.fp_off = r.fp_off;
      if (r.fp_from == fp_base::fp) b.flags |= JW_ROW_FP_AT_FP;
      if (r.fp_from == fp_base::sp) b.flags |= JW_ROW_FP_AT_SP;
    }
  }
  return b;
}

bool same_rule(const jw_row& a, const jw_row& b) {
  return a.kind == b.kind && a.cfa_off == b.cfa_off && a.fp_off == b.fp_off && a.flags == b.flags &&
         a.ra_off == b.ra_off;
}

}  // namespace

result<range_rows> flatten(std::vector<unwind_function> functions, uint64_t bias,
                           const flatten_limits& limits) {
  std::stable_sort(
      functions.begin(), functions.end(),
      [](const unwind_function& a, const unwind_function& b) { return a.start < b.start; });
  range_rows out;
  uint64_t cursor = 0;  // end of the last function laid out (absolute)
  bool first = true;
  auto push = [&](jw_row row) -> result<void> {
    if (!out.rows.empty()) {
      jw_row& last = out.rows.back();
      if (last.pc_off == row.pc_off) {  // a zero-length gap or row: the later one wins
        last = row;
        if (out.rows.size() >= 2 && same_rule(out.rows[out.rows.size() - 2], last)) {
          out.rows.pop_back();
        }
        return {};
      }
      if (same_rule(last, row)) return {};
    }
    if (out.rows.size() >= limits.max_rows) {
      return make_error(errc::limit_exceeded, "more than %zu rows in the range starting at %s",
                        limits.max_rows, hex(out.start).c_str());
    }
    out.rows.push_back(row);
    return {};
  };

  for (const unwind_function& f : functions) {
    const uint64_t start = f.start + bias;
    const uint64_t end = start + f.size;
    if (f.size == 0 || f.rows.empty() || end < start) {
      if (limits.strict) {
        return make_error(errc::malformed, "function at %s: empty or wrapping range",
                          hex(start).c_str());
      }
      ++out.dropped;
      continue;
    }
    if (start < limits.lo || end > limits.hi) {
      if (limits.strict) {
        return make_error(
            errc::malformed, "function [%s, %s) lies outside the covered text [%s, %s)",
            hex(start).c_str(), hex(end).c_str(), hex(limits.lo).c_str(), hex(limits.hi).c_str());
      }
      ++out.dropped;
      continue;
    }
    if (!first && start < cursor) {
      if (limits.strict) {
        return make_error(errc::malformed,
                          "function [%s, %s) overlaps the previous function (ends at %s)",
                          hex(start).c_str(), hex(end).c_str(), hex(cursor).c_str());
      }
      ++out.dropped;
      continue;
    }
    if (first) {
      out.start = start;
      first = false;
    } else if (start > cursor) {
      jw_row gap{};
      gap.pc_off = static_cast<uint32_t>(cursor - out.start);
      gap.kind = JW_ROW_GAP;
      if (auto r = push(gap); !r) return r.error();
    }
    if (end - out.start > UINT32_MAX) {
      return make_error(errc::limit_exceeded, "range starting at %s would exceed 4 GiB",
                        hex(out.start).c_str());
    }
    const uint32_t base = static_cast<uint32_t>(start - out.start);
    if (f.pcmask_rep == 0) {
      for (const unwind_row& r : f.rows) {
        if (r.pc_off >= f.size) break;
        if (auto e = push(to_bpf(r, base + r.pc_off, f.source)); !e) return e.error();
      }
    } else {
      for (uint64_t block = 0; block < f.size; block += f.pcmask_rep) {
        for (const unwind_row& r : f.rows) {
          if (r.pc_off >= f.pcmask_rep || block + r.pc_off >= f.size) break;
          auto e = push(to_bpf(r, base + static_cast<uint32_t>(block) + r.pc_off, f.source));
          if (!e) return e.error();
        }
      }
    }
    cursor = end;
    ++out.functions;
  }
  if (first) return make_error(errc::not_found, "no function to lay out");
  out.end = cursor;
  return out;
}

const jw_row* lookup_row(const range_rows& r, uint64_t pc) noexcept {
  if (pc < r.start || pc >= r.end || r.rows.empty()) return nullptr;
  const uint64_t off = pc - r.start;
  auto it = std::upper_bound(r.rows.begin(), r.rows.end(), off,
                             [](uint64_t v, const jw_row& row) { return v < row.pc_off; });
  if (it == r.rows.begin()) return nullptr;
  return &*(it - 1);
}

}  // namespace jitwalk
