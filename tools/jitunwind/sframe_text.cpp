#include "sframe_text.hpp"

#include "cli.hpp"
#include <jitunwind/toolkit/terminal_text.hpp>
#include "sframe_json.hpp"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>

namespace jitunwind::cli {

namespace {

// Formats onto the end of `out`, however long the result (symbol names and paths can be long).
[[gnu::format(printf, 2, 3)]] void append(std::string& out, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list again;
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  if (n > 0) {
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, fmt, again);
    out.resize(at + static_cast<size_t>(n));
  }
  va_end(again);
}

std::string offset_text(const char* base, int32_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%+d", base, v);
  return buf;
}

std::string ra_text(abi target, const frame_row& r) {
  std::string s;
  switch (r.ra) {
    case ra_rule::undefined:
      return "undefined";
    case ra_rule::in_register:
      s = target == abi::amd64 ? "in register" : "lr";
      break;
    case ra_rule::saved:
      s = offset_text("cfa", r.ra_offset);
      break;
    case ra_rule::register_value:
    case ra_rule::register_saved:
      s = register_rule_text(target, r.ra_reg, r.ra_offset, r.ra == ra_rule::register_saved);
      break;
  }
  // Pointer authentication: the RA (in LR or on the stack) is signed.
  if (r.ra_mangled) s += " (signed)";
  return s;
}

std::string fp_text(abi target, const frame_row& r) {
  switch (r.fp) {
    case fp_rule::saved:
      return offset_text("cfa", r.fp_offset);
    case fp_rule::register_value:
    case fp_rule::register_saved:
      return register_rule_text(target, r.fp_reg, r.fp_offset, r.fp == fp_rule::register_saved);
    case fp_rule::unchanged:
      break;
  }
  return "unchanged";
}

std::string flags_text(uint8_t flags) {
  std::string s;
  for (const auto& name : sframe_flag_names(flags)) s += (s.empty() ? "" : " | ") + name;
  if (s.empty()) s = "none";
  char buf[16];
  std::snprintf(buf, sizeof buf, " (0x%x)", flags);
  return s + buf;
}

}  // namespace

std::string render_sframe_text(const std::string& path, const sframe_source& source,
                               const sframe::decoded_section& section) {
  std::string all;
  write_sframe_text(path, source, section, [&](std::string& chunk) {
    all += chunk;
    chunk.clear();
  });
  return all;
}

void write_sframe_text(const std::string& path, const sframe_source& source,
                       const sframe::decoded_section& section, const text_sink& sink) {
  std::string out;
  const sframe::section_info& h = section.info;
  append(out, "File: %s%s%s%s\n", path.c_str(), source.elf_kind.empty() ? "" : " (",
         source.elf_kind.c_str(), source.elf_kind.empty() ? "" : ")");
  append(out, "SFrame %s at 0x%" PRIx64 ", %zu bytes", source.where.c_str(), source.address,
         source.bytes.size());
  if (source.relocations_applied)
    append(out, ", %zu relocations applied", source.relocations_applied);
  out += "\n\nHeader:\n";
  append(out, "  Version:                 %u\n", h.version);
  append(out, "  Flags:                   %s\n", flags_text(h.flags).c_str());
  append(out, "  ABI:                     %s (%u)\n", to_string(h.target),
         static_cast<unsigned>(h.target));
  append(out, "  CFA fixed FP offset:     %d\n", h.cfa_fixed_fp_offset);
  append(out, "  CFA fixed RA offset:     %d\n", h.cfa_fixed_ra_offset);
  append(out, "  Auxiliary header length: %u\n", h.aux_header_len);
  append(out, "  Functions (FDEs):        %u\n", h.num_fdes);
  append(out, "  Rows (FREs):             %u\n", h.num_fres);
  append(out, "  FRE sub-section length:  %u\n", h.fre_len);
  append(out, "  FDE sub-section offset:  %u\n", h.fde_off);
  append(out, "  FRE sub-section offset:  %u\n", h.fre_off);

  for (size_t i = 0; i < section.functions.size(); ++i) {
    const function_desc& f = section.functions[i];
    append(out, "\nFunction %zu", i);
    auto name = source.function_symbols.find(f.start);
    if (name != source.function_symbols.end())
      append(out, " <%s>", toolkit::terminal_text(name->second).c_str());  // the file's bytes
    append(out, ": [0x%" PRIx64 ", 0x%" PRIx64 ") size %u", f.start,
           f.start + static_cast<uint64_t>(f.size), f.size);
    if (f.pcmask_rep) append(out, ", PCMASK (rows repeat every %u bytes)", f.pcmask_rep);
    if (i < section.layout.size() && section.layout[i].fde_type == 1) append(out, ", FLEX");
    if (f.signal_frame) append(out, ", signal frame");
    if (f.pauth_key == 1) append(out, ", PAuth key B");
    append(out, ", %s\n", count_text(f.rows.size(), "row").c_str());
    if (f.rows.empty() && h.version >= 3) {
      append(out, "  outermost frame (no rows: return address undefined everywhere)\n");
      continue;
    }
    append(out, "  %-26s %-10s %-16s %s\n", f.pcmask_rep ? "BLOCK OFFSET" : "PC", "CFA", "RA",
           "FP");
    for (const frame_row& r : f.rows) {
      char pc[64];
      if (f.pcmask_rep)
        std::snprintf(pc, sizeof pc, "+0x%x", r.pc_offset);
      else
        std::snprintf(pc, sizeof pc, "0x%" PRIx64 " (+0x%x)", f.start + r.pc_offset, r.pc_offset);
      if (r.ra == ra_rule::undefined) {
        append(out, "  %-26s outermost frame (return address undefined)\n", pc);
        continue;
      }
      append(out, "  %-26s %-10s %-16s %s\n", pc, cfa_text(h.target, r).c_str(),
             ra_text(h.target, r).c_str(), fp_text(h.target, r).c_str());
    }
    sink(out);
  }
  sink(out);
}

}  // namespace jitunwind::cli
