#include "sframe_json.hpp"

#include "cli.hpp"

#include <jitunwind/sframe.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cinttypes>
#include <limits>
#include <numeric>
#include <set>

namespace jitunwind::cli {

namespace {

using json = nlohmann::ordered_json;

struct flag_name {
  uint8_t bit;
  const char* name;
};
constexpr flag_name flag_names[] = {
    {sframe::flag_fde_sorted, "FDE_SORTED"},
    {sframe::flag_frame_pointer, "FRAME_POINTER"},
    {sframe::flag_fde_func_start_pcrel, "FDE_FUNC_START_PCREL"},
};

/// Serializes without throwing: strings that are not valid UTF-8 (ELF symbol names can be
/// anything) get U+FFFD instead of making nlohmann throw.
std::string dump_value(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

error path_error(const std::string& path, const std::string& message) {
  return error(errc::invalid_argument, path + ": " + message);
}

/// A short rendering of a JSON value for messages.
std::string shown(const json& j) {
  std::string s = dump_value(j);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

result<void> check_keys(const json& obj, const std::string& path,
                        std::initializer_list<const char*> allowed) {
  for (const auto& item : obj.items()) {
    bool known = false;
    for (const char* k : allowed) known = known || item.key() == k;
    if (!known) {
      std::string list;
      for (const char* k : allowed) list += std::string(list.empty() ? "" : ", ") + k;
      return path_error(path, "unknown key \"" + item.key() + "\" (expected " + list + ")");
    }
  }
  return {};
}

/// An unsigned integer in [min, max]: a JSON integer, or a string in decimal or 0x-hex (JSON
/// has no hexadecimal literals and addresses are easier to read in hex).
result<uint64_t> get_unsigned(const json& j, const std::string& path, uint64_t min, uint64_t max) {
  uint64_t v = 0;
  if (j.is_number_unsigned()) {
    v = j.get<uint64_t>();
  } else if (j.is_number_integer()) {
    return path_error(path, "expected an integer >= " + std::to_string(min) + ", got " + shown(j));
  } else if (j.is_string()) {
    auto parsed = parse_u64(j.get<std::string>());
    if (!parsed)
      return path_error(path, "expected an integer or a \"0x...\" string, got " + shown(j));
    v = *parsed;
  } else {
    return path_error(path, "expected an integer, got " + shown(j));
  }
  if (v < min || v > max)
    return path_error(path, std::to_string(v) + " is out of range (" + std::to_string(min) + ".." +
                                std::to_string(max) + ")");
  return v;
}

result<int32_t> get_signed32(const json& j, const std::string& path) {
  if (!j.is_number_integer()) return path_error(path, "expected an integer, got " + shown(j));
  if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max()))
    return path_error(path, shown(j) + " does not fit in 32 bits");
  const int64_t v = j.get<int64_t>();
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
    return path_error(path, shown(j) + " does not fit in 32 bits");
  return static_cast<int32_t>(v);
}

/// A register expression: "sp+16", "fp-8", "r10+0" (DWARF register 10), optionally inside
/// "*(...)" (the value in memory at that address). "sp-8" etc. are parsed and left to the
/// frame-model validation.
struct reg_expr {
  uint8_t reg = 0;  ///< DWARF number
  bool is_sp = false, is_fp = false;
  int32_t offset = 0;
  bool deref = false;
};

std::optional<reg_expr> parse_reg_expr(abi target, std::string s, bool* too_large = nullptr) {
  reg_expr e;
  if (s.size() > 3 && s.compare(0, 2, "*(") == 0 && s.back() == ')') {
    e.deref = true;
    s = s.substr(2, s.size() - 3);
  }
  const size_t op = s.find_first_of("+-");
  if (op == std::string::npos || op == 0 || op + 1 >= s.size()) return std::nullopt;
  const std::string name = s.substr(0, op);
  const std::string digits = s.substr(op + 1);
  if (digits.size() > 10 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const dwarf_regs regs = dwarf_registers(target);
  if (name == "sp") {
    e.reg = regs.sp;
  } else if (name == "fp") {
    e.reg = regs.fp;
  } else if (name.size() >= 2 && name.size() <= 4 && name[0] == 'r' &&
             std::all_of(name.begin() + 1, name.end(),
                         [](char c) { return c >= '0' && c <= '9'; })) {
    const int n = std::stoi(name.substr(1));
    if (n > 255) return std::nullopt;
    e.reg = static_cast<uint8_t>(n);
  } else {
    return std::nullopt;
  }
  e.is_sp = e.reg == regs.sp;
  e.is_fp = e.reg == regs.fp;
  int64_t v = std::stoll(digits);
  if (s[op] == '-') v = -v;
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    if (too_large != nullptr) *too_large = true;
    return std::nullopt;
  }
  e.offset = static_cast<int32_t>(v);
  return e;
}

/// "sp+16", "fp+16", "r10+0" (v3: another register), "*(fp-8)" (v3: loaded from memory).
result<void> parse_cfa(const json& j, const std::string& path, abi target, frame_row& row) {
  const auto bad = [&] {
    return path_error(path,
                      "expected \"sp+N\", \"fp+N\", \"rREG+N\" or \"*(...)\" of one of "
                      "them, got " +
                          shown(j));
  };
  if (!j.is_string()) return bad();
  bool too_large = false;
  auto e = parse_reg_expr(target, j.get<std::string>(), &too_large);
  if (too_large) return path_error(path, "offset in " + shown(j) + " does not fit in 32 bits");
  if (!e) return bad();
  row.cfa = e->is_sp ? cfa_base::sp : e->is_fp ? cfa_base::fp : cfa_base::reg;
  row.cfa_reg = row.cfa == cfa_base::reg ? e->reg : 0;
  row.cfa_deref = e->deref;
  row.cfa_offset = e->offset;
  return {};
}

/// The string form of an RA or FP rule naming a register: "r3+0" (the value of register 3 plus
/// 0), "*(fp+0)" (in memory at fp + 0).
result<reg_expr> parse_register_rule(const json& j, const std::string& path, abi target) {
  bool too_large = false;
  auto e = parse_reg_expr(target, j.get<std::string>(), &too_large);
  if (too_large) return path_error(path, "offset in " + shown(j) + " does not fit in 32 bits");
  if (!e)
    return path_error(
        path, "expected an offset from the CFA, \"rREG+N\" or \"*(rREG+N)\", got " + shown(j));
  return *e;
}

result<frame_row> parse_row(const json& j, const std::string& path, abi target) {
  if (!j.is_object()) return path_error(path, "expected an object, got " + shown(j));
  if (auto r = check_keys(j, path, {"pc", "cfa", "ra", "fp", "ra_mangled", "outermost"}); !r)
    return r.error();
  frame_row row;
  if (!j.contains("pc")) return path_error(path, "missing \"pc\"");
  auto pc = get_unsigned(j["pc"], path + ".pc", 0, std::numeric_limits<uint32_t>::max());
  if (!pc) return pc.error();

  bool outermost = false;
  if (j.contains("outermost")) {
    if (!j["outermost"].is_boolean())
      return path_error(path + ".outermost",
                        "expected true or false, got " + shown(j["outermost"]));
    outermost = j["outermost"].get<bool>();
  }
  if (outermost) {
    for (const char* k : {"cfa", "ra", "fp", "ra_mangled"})
      if (j.contains(k))
        return path_error(path, std::string("an outermost row has no \"") + k +
                                    "\" (the return address is undefined)");
    return outermost_row(static_cast<uint32_t>(*pc));
  }

  row = entry_row(target);
  row.pc_offset = static_cast<uint32_t>(*pc);
  if (!j.contains("cfa")) return path_error(path, "missing \"cfa\" (or \"outermost\": true)");
  if (auto r = parse_cfa(j["cfa"], path + ".cfa", target, row); !r) return r.error();
  if (j.contains("ra")) {
    if (j["ra"].is_string()) {
      auto e = parse_register_rule(j["ra"], path + ".ra", target);
      if (!e) return e.error();
      const bool lr = target != abi::amd64 && e->reg == dwarf_registers(target).ra;
      if (lr && !e->deref && e->offset == 0) {
        row.ra = ra_rule::in_register;  // the link register: spelled by leaving "ra" out
        row.ra_offset = 0;
      } else {
        row.ra = e->deref ? ra_rule::register_saved : ra_rule::register_value;
        row.ra_reg = e->reg;
        row.ra_offset = e->offset;
      }
    } else {
      auto ra = get_signed32(j["ra"], path + ".ra");
      if (!ra) return ra.error();
      row.ra = ra_rule::saved;
      row.ra_offset = *ra;
    }
  } else if (target == abi::amd64) {
    row.ra = ra_rule::saved;
    row.ra_offset = -8;
  } else {
    row.ra = ra_rule::in_register;
    row.ra_offset = 0;
  }
  if (j.contains("fp")) {
    if (j["fp"].is_string()) {
      auto e = parse_register_rule(j["fp"], path + ".fp", target);
      if (!e) return e.error();
      row.fp = e->deref ? fp_rule::register_saved : fp_rule::register_value;
      row.fp_reg = e->reg;
      row.fp_offset = e->offset;
    } else {
      auto fp = get_signed32(j["fp"], path + ".fp");
      if (!fp) return fp.error();
      row.fp = fp_rule::saved;
      row.fp_offset = *fp;
    }
  }
  if (j.contains("ra_mangled")) {
    if (!j["ra_mangled"].is_boolean())
      return path_error(path + ".ra_mangled",
                        "expected true or false, got " + shown(j["ra_mangled"]));
    row.ra_mangled = j["ra_mangled"].get<bool>();
  }
  return row;
}

result<uint8_t> parse_flags(const json& j) {
  if (!j.is_array()) return path_error("flags", "expected an array of flag names, got " + shown(j));
  uint8_t flags = 0;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string path = "flags[" + std::to_string(i) + "]";
    bool found = false;
    if (j[i].is_string())
      for (const auto& f : flag_names)
        if (j[i].get<std::string>() == f.name) {
          flags |= f.bit;
          found = true;
        }
    if (!found)
      return path_error(path,
                        "expected \"FDE_SORTED\", \"FRAME_POINTER\" or "
                        "\"FDE_FUNC_START_PCREL\", got " +
                            shown(j[i]));
  }
  return flags;
}

/// A flat object or array on one line, with a space after ':' and ','.
std::string one_line(const json& j) {
  std::string s;
  if (j.is_object()) {
    for (const auto& item : j.items())
      s += (s.empty() ? "" : ", ") + dump_value(json(item.key())) + ": " + one_line(item.value());
    return "{" + s + "}";
  }
  if (j.is_array()) {
    for (const auto& v : j) s += (s.empty() ? "" : ", ") + one_line(v);
    return "[" + s + "]";
  }
  return dump_value(j);
}

}  // namespace

std::vector<std::string> sframe_flag_names(uint8_t flags) {
  std::vector<std::string> out;
  uint8_t known = 0;
  for (const auto& f : flag_names) {
    known |= f.bit;
    if (flags & f.bit) out.emplace_back(f.name);
  }
  for (int bit = 0; bit < 8; ++bit)
    if ((flags & ~known) & (1u << bit)) out.push_back(hex_text(1u << bit));
  return out;
}

std::string register_text(abi target, uint8_t reg) {
  const dwarf_regs regs = dwarf_registers(target);
  if (reg == regs.sp) return "sp";
  if (reg == regs.fp) return "fp";
  return "r" + std::to_string(reg);
}

namespace {

std::string offset_expr(const std::string& base, int32_t offset, bool deref) {
  std::string s = base + (offset < 0 ? "-" : "+");
  s += std::to_string(offset < 0 ? -int64_t(offset) : int64_t(offset));
  return deref ? "*(" + s + ")" : s;
}

}  // namespace

std::string cfa_text(abi target, const frame_row& r) {
  const std::string base = r.cfa == cfa_base::sp   ? "sp"
                           : r.cfa == cfa_base::fp ? "fp"
                                                   : register_text(target, r.cfa_reg);
  return offset_expr(base, r.cfa_offset, r.cfa_deref);
}

std::string register_rule_text(abi target, uint8_t reg, int32_t offset, bool deref) {
  return offset_expr(register_text(target, reg), offset, deref);
}

// Offset of the first bracket that nests arrays/objects more than `max_depth` deep, if any.
// The checks below copy and print values recursively, so input nested 100 000 deep (hostile or
// generated by mistake) is refused before parsing rather than overflowing the stack.
std::optional<size_t> too_deep(const std::string& text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

namespace {

// Builds the document as nlohmann's own parser does, and notes the first key an object repeats.
struct duplicate_checking_dom {
  explicit duplicate_checking_dom(json& doc) : dom(doc) {}
  nlohmann::detail::json_sax_dom_parser<json> dom;
  std::vector<std::set<std::string>> keys;  // per open object
  std::string duplicate;

  bool null() { return dom.null(); }
  bool boolean(bool v) { return dom.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return dom.number_float(v, s);
  }
  bool string(json::string_t& v) { return dom.string(v); }
  bool binary(json::binary_t& v) { return dom.binary(v); }
  bool start_object(std::size_t n) {
    keys.emplace_back();
    return dom.start_object(n);
  }
  bool key(json::string_t& k) {
    if (duplicate.empty() && !keys.back().insert(k).second) duplicate = k;
    return dom.key(k);
  }
  bool end_object() {
    keys.pop_back();
    return dom.end_object();
  }
  bool start_array(std::size_t n) { return dom.start_array(n); }
  bool end_array() { return dom.end_array(); }
  template <class Exception>
  bool parse_error(std::size_t at, const std::string& token, const Exception& e) {
    return dom.parse_error(at, token, e);
  }
};

}  // namespace

result<sframe_description> parse_sframe_json(const std::string& text) {
  constexpr size_t max_depth = 64;  // a description needs 5
  if (auto at = too_deep(text, max_depth))
    return error(errc::invalid_argument, "invalid JSON: nested more than " +
                                             std::to_string(max_depth) + " levels deep at byte " +
                                             std::to_string(*at));
  // nlohmann keeps the last of duplicate keys; a description with two "functions" is a mistake
  // to report, not to resolve silently. (Its callback parser would see them too, but it scans
  // the enclosing array at the end of every object: quadratic in the rows of a function.)
  json doc;
  duplicate_checking_dom sax(doc);
  try {
    json::sax_parse(text, &sax);
  } catch (const json::exception& e) {
    // nlohmann's message names line and column ("[json.exception.parse_error.101] parse error at
    // line 3, column 5: ..."); drop the exception id. Numbers too large for 64 bits are
    // out_of_range exceptions.
    std::string what = e.what();
    if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    return error(errc::invalid_argument, "invalid JSON: " + what);
  }
  const std::string& duplicate = sax.duplicate;
  if (!duplicate.empty())
    return error(errc::invalid_argument, "invalid JSON: duplicate key \"" + duplicate + "\"");
  if (!doc.is_object()) return path_error("(top level)", "expected an object, got " + shown(doc));
  if (auto r = check_keys(doc, "(top level)", {"version", "abi", "flags", "functions"}); !r)
    return r.error();

  sframe_description d;
  if (doc.contains("version")) {
    auto v = get_unsigned(doc["version"], "version", 0, 255);
    if (!v) return v.error();
    if (*v != 2 && *v != 3)
      return path_error("version",
                        "only versions 2 and 3 can be encoded, got " + std::to_string(*v));
    d.version = static_cast<uint8_t>(*v);
  }
  const uint8_t version = d.version.value_or(3);
  if (!doc.contains("abi"))
    return path_error("(top level)",
                      "missing \"abi\" (\"amd64\", \"aarch64-le\" or \"aarch64-be\")");
  if (!doc["abi"].is_string())
    return path_error(
        "abi", "expected \"amd64\", \"aarch64-le\" or \"aarch64-be\", got " + shown(doc["abi"]));
  auto target = parse_abi(doc["abi"].get<std::string>());
  if (!target)
    return path_error(
        "abi", "expected \"amd64\", \"aarch64-le\" or \"aarch64-be\", got " + shown(doc["abi"]));
  d.target = *target;
  if (doc.contains("flags")) {
    auto flags = parse_flags(doc["flags"]);
    if (!flags) return flags.error();
    if (version >= 3 && (*flags & sframe::flag_frame_pointer))
      return path_error("flags", "\"FRAME_POINTER\" does not exist in SFrame version 3");
    d.flags = *flags;
  }
  if (!doc.contains("functions")) return path_error("(top level)", "missing \"functions\"");
  const json& functions = doc["functions"];
  if (!functions.is_array())
    return path_error("functions", "expected an array, got " + shown(functions));

  bool any_name = false;
  for (size_t i = 0; i < functions.size(); ++i) {
    const std::string path = "functions[" + std::to_string(i) + "]";
    const json& fj = functions[i];
    if (!fj.is_object()) return path_error(path, "expected an object, got " + shown(fj));
    if (auto r = check_keys(fj, path,
                            {"name", "start", "size", "pcmask_rep", "signal", "pauth_key", "rows"});
        !r)
      return r.error();
    function_desc f;
    std::string name;
    if (fj.contains("name")) {
      if (!fj["name"].is_string())
        return path_error(path + ".name", "expected a string, got " + shown(fj["name"]));
      name = fj["name"].get<std::string>();
      // ELF symbol names end at the first NUL: one inside would silently cut the name.
      if (name.find('\0') != std::string::npos)
        return path_error(path + ".name", "contains a NUL character (\\u0000)");
      any_name = true;
    }
    for (const char* k : {"start", "size", "rows"})
      if (!fj.contains(k)) return path_error(path, std::string("missing \"") + k + "\"");
    auto start = get_unsigned(fj["start"], path + ".start", 0, UINT64_MAX);
    if (!start) return start.error();
    auto size = get_unsigned(fj["size"], path + ".size", 1, UINT32_MAX);
    if (!size) return size.error();
    f.start = *start;
    f.size = static_cast<uint32_t>(*size);
    if (fj.contains("pcmask_rep")) {
      // SFrame stores the repetition size in one byte.
      auto rep = get_unsigned(fj["pcmask_rep"], path + ".pcmask_rep", 0, 255);
      if (!rep) return rep.error();
      f.pcmask_rep = static_cast<uint32_t>(*rep);
    }
    if (fj.contains("signal")) {
      if (!fj["signal"].is_boolean())
        return path_error(path + ".signal", "expected true or false, got " + shown(fj["signal"]));
      f.signal_frame = fj["signal"].get<bool>();
    }
    if (fj.contains("pauth_key")) {
      const json& k = fj["pauth_key"];
      if (!k.is_string() || (k.get<std::string>() != "a" && k.get<std::string>() != "b"))
        return path_error(path + ".pauth_key", "expected \"a\" or \"b\", got " + shown(k));
      f.pauth_key = k.get<std::string>() == "b" ? 1 : 0;
    }
    const json& rows = fj["rows"];
    if (!rows.is_array())
      return path_error(path + ".rows", "expected an array of rows, got " + shown(rows));
    // No rows: an outermost function, which only v3 can say (a DEFAULT FDE without FREs).
    if (rows.empty() && version < 3)
      return path_error(path + ".rows",
                        "an empty array (an outermost function without rows) needs version 3; "
                        "in version 2 write [{\"pc\": 0, \"outermost\": true}]");
    for (size_t r = 0; r < rows.size(); ++r) {
      auto row = parse_row(rows[r], path + ".rows[" + std::to_string(r) + "]", d.target);
      if (!row) return row.error();
      f.rows.push_back(*row);
    }
    function_desc checked = f;
    if (checked.rows.empty()) checked.rows.push_back(outermost_row(0));
    if (auto v = validate(d.target, checked); !v) return path_error(path, v.error().message());
    d.functions.push_back(std::move(f));
    d.names.push_back(std::move(name));
  }
  if (!any_name) d.names.clear();

  // Overlaps are reported here with JSON paths; the encoder would only name addresses.
  std::vector<size_t> order(d.functions.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return d.functions[a].start < d.functions[b].start; });
  for (size_t k = 1; k < order.size(); ++k) {
    const function_desc& a = d.functions[order[k - 1]];
    const function_desc& b = d.functions[order[k]];
    if (a.start + a.size > b.start)
      return path_error("functions[" + std::to_string(order[k]) + "]",
                        "[" + hex_text(b.start) + ", " + hex_text(b.start + b.size) +
                            ") overlaps functions[" + std::to_string(order[k - 1]) + "] [" +
                            hex_text(a.start) + ", " + hex_text(a.start + a.size) + ")");
  }
  return d;
}

void write_sframe_json(const sframe_description& d, const text_sink& sink) {
  json doc;
  doc["version"] = d.version.value_or(sframe::version_3);
  doc["abi"] = to_string(d.target);
  if (d.flags) doc["flags"] = sframe_flag_names(*d.flags);
  // Layout meant for reading and hand-editing: one row per line. Written function by function:
  // the text of a large section is never held whole.
  std::string out = "{\n";
  for (const auto& item : doc.items())
    out += "  " + dump_value(json(item.key())) + ": " + one_line(item.value()) + ",\n";
  out += "  \"functions\": [";
  for (size_t i = 0; i < d.functions.size(); ++i) {
    const function_desc& f = d.functions[i];
    json fj;
    if (i < d.names.size() && !d.names[i].empty()) fj["name"] = d.names[i];
    fj["start"] = f.start;
    fj["size"] = f.size;
    if (f.pcmask_rep != 0) fj["pcmask_rep"] = f.pcmask_rep;
    if (f.signal_frame) fj["signal"] = true;
    if (f.pauth_key == 1) fj["pauth_key"] = "b";
    out += i ? ",\n    {" : "\n    {";
    for (const auto& item : fj.items())
      out += "\n      " + dump_value(json(item.key())) + ": " + one_line(item.value()) + ",";
    out += "\n      \"rows\": [";
    for (size_t k = 0; k < f.rows.size(); ++k) {
      const frame_row& r = f.rows[k];
      json rj;
      rj["pc"] = r.pc_offset;
      if (r.ra == ra_rule::undefined) {
        rj["outermost"] = true;
      } else {
        rj["cfa"] = cfa_text(d.target, r);
        // AMD64's RA is implicitly at CFA-8; anything else (a v3 FLEX row, or foreign input) is
        // shown so that nothing is hidden.
        if (r.ra == ra_rule::saved && (d.target != abi::amd64 || r.ra_offset != -8))
          rj["ra"] = r.ra_offset;
        if (r.ra == ra_rule::register_value || r.ra == ra_rule::register_saved)
          rj["ra"] =
              register_rule_text(d.target, r.ra_reg, r.ra_offset, r.ra == ra_rule::register_saved);
        if (r.fp == fp_rule::saved) rj["fp"] = r.fp_offset;
        if (r.fp == fp_rule::register_value || r.fp == fp_rule::register_saved)
          rj["fp"] =
              register_rule_text(d.target, r.fp_reg, r.fp_offset, r.fp == fp_rule::register_saved);
        if (r.ra_mangled) rj["ra_mangled"] = true;
      }
      out += (k ? ",\n        " : "\n        ") + one_line(rj);
    }
    out += "\n      ]\n    }";
    sink(out);
  }
  out += d.functions.empty() ? "]\n}\n" : "\n  ]\n}\n";
  sink(out);
}

std::string to_sframe_json(const sframe_description& d) {
  std::string all;
  write_sframe_json(d, [&](std::string& chunk) {
    all += chunk;
    chunk.clear();
  });
  return all;
}

}  // namespace jitunwind::cli
