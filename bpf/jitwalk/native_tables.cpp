#include "jitwalk/native_tables.hpp"

#include <jitunwind/sframe.h>

#include "jitwalk/ehframe.hpp"

#include <algorithm>

namespace jitwalk {

result<std::vector<unwind_function>> sframe_functions(std::span<const uint8_t> bytes,
                                                      uint64_t section_address, table_source source,
                                                      int* version_out, bool check_rules) {
  auto dec = jitunwind::sframe::decode(bytes, section_address);
  if (!dec) return dec.error();
  if (version_out != nullptr) *version_out = dec->info.version;
  if (dec->info.target != jitunwind::abi::amd64) {
    return make_error(errc::unsupported, "SFrame for %s: this walker unwinds AMD64 only",
                      jitunwind::to_string(dec->info.target));
  }
  std::vector<unwind_function> out;
  out.reserve(dec->functions.size());
  const bool v3 = dec->info.version >= jitunwind::sframe::version_3;
  for (size_t i = 0; i < dec->functions.size(); ++i) {
    jitunwind::function_desc& fd = dec->functions[i];
    // A function of size 0 covers no PC (gas emits them for empty functions); before v3 one
    // without rows says nothing (v3: an outermost frame, see from_frame_model).
    if (fd.size == 0 || (fd.rows.empty() && !v3)) continue;
    if (check_rules) {
      jitunwind::function_desc checked = fd;
      if (checked.rows.empty()) checked.rows.push_back(jitunwind::outermost_row(0));
      if (auto v = jitunwind::validate(jitunwind::abi::amd64, checked); !v) {
        return make_error(errc::malformed, "SFrame FDE %zu: %s", i, v.error().message().c_str());
      }
    }
    auto f = from_frame_model(dec->functions[i], source);
    if (!f) {
      return make_error(errc::malformed, "SFrame FDE %zu: %s", i, f.error().message().c_str());
    }
    out.push_back(std::move(f.value()));
  }
  return out;
}

result<native_functions> collect_native_functions(const elf_file& obj,
                                                  const native_policy& policy) {
  native_functions t;
  std::vector<unwind_function>& fns = t.functions;
  if (policy.use_sframe) {
    uint64_t vaddr = 0;
    const auto sec = obj.section(".sframe", &vaddr);
    if (!sec.empty()) {
      auto r = sframe_functions(sec.span(), vaddr, table_source::sframe, &t.sframe_version);
      if (r) {
        fns = std::move(r.value());
        t.sframe_functions = fns.size();
      } else {
        t.problems.push_back(".sframe: " + r.error().message());
      }
    }
  }
  if (policy.use_eh_frame) {
    uint64_t vaddr = 0;
    const auto sec = obj.section(".eh_frame", &vaddr);
    if (!sec.empty()) {
      auto r = parse_eh_frame(sec.span(), vaddr);
      if (r) {
        for (const std::string& p : r->problems) t.problems.push_back(".eh_frame: " + p);
        // SFrame wins where both describe a function: keep only eh_frame functions that do not
        // overlap any SFrame function.
        std::vector<std::pair<uint64_t, uint64_t>> covered;
        for (const auto& f : fns) covered.emplace_back(f.start, f.start + f.size);
        std::sort(covered.begin(), covered.end());
        for (auto& f : r->functions) {
          const uint64_t s = f.start, e = f.start + f.size;
          auto it =
              std::lower_bound(covered.begin(), covered.end(), std::make_pair(e, uint64_t{0}));
          bool overlaps = false;
          if (it != covered.begin()) {
            auto prev = it - 1;
            overlaps = prev->second > s;
          }
          if (!overlaps) {
            fns.push_back(std::move(f));
            ++t.eh_frame_functions;
          }
        }
      } else {
        t.problems.push_back(".eh_frame: " + r.error().message());
      }
    }
  }
  if (fns.empty()) return make_error(errc::not_found, "%s: no unwind table", obj.path().c_str());
  return t;
}

result<native_table> lay_out_native_table(const native_functions& fns, const std::string& path,
                                          uint64_t bias, uint64_t lo, uint64_t hi) {
  native_table t;
  t.sframe_functions = fns.sframe_functions;
  t.eh_frame_functions = fns.eh_frame_functions;
  t.sframe_version = fns.sframe_version;
  t.problems = fns.problems;
  // Only the functions of this part are copied (flatten drops the others anyway): an object
  // mapped in several executable parts is parsed once and laid out per part.
  std::vector<unwind_function> part;
  for (const unwind_function& f : fns.functions) {
    if (f.start + bias < hi && f.start + bias + f.size > lo) part.push_back(f);
  }
  if (part.empty()) return make_error(errc::not_found, "%s: no unwind table", path.c_str());
  flatten_limits lim;
  lim.lo = lo;
  lim.hi = hi;
  auto rows = flatten(std::move(part), bias, lim);
  if (!rows) {
    return make_error(rows.error().code(), "%s: %s", path.c_str(), rows.error().message().c_str());
  }
  t.rows = std::move(rows.value());
  return t;
}

result<native_table> build_native_table(const elf_file& obj, uint64_t bias, uint64_t lo,
                                        uint64_t hi, const native_policy& policy) {
  auto fns = collect_native_functions(obj, policy);
  if (!fns) return fns.error();
  return lay_out_native_table(fns.value(), obj.path(), bias, lo, hi);
}

result<native_policy> parse_native_policy(const std::string& value) {
  native_policy p{false, false};
  if (value == "none") return p;
  size_t start = 0;
  for (;;) {
    const size_t comma = value.find(',', start);
    const std::string item =
        value.substr(start, comma == std::string::npos ? comma : comma - start);
    bool& flag = item == "sframe" ? p.use_sframe : p.use_eh_frame;
    if ((item != "sframe" && item != "eh_frame") || flag)
      return make_error(
          errc::invalid_argument,
          "--native-tables: '%s' (expected sframe,eh_frame, sframe, eh_frame or none)",
          value.c_str());
    flag = true;
    if (comma == std::string::npos) return p;
    start = comma + 1;
  }
}

}  // namespace jitwalk
