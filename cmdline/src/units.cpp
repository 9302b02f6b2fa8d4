#include "cmdline/units.hpp"

#include <charconv>
#include <cmath>
#include <cstring>

namespace cmdline {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool fail(number_error* why, number_error e) {
  if (why != nullptr) *why = e;
  return false;
}

std::nullopt_t none(number_error* why, number_error e) {
  fail(why, e);
  return std::nullopt;
}

/// Splits "1.5ms" into the number (1.5) and the unit ("ms"). The number must start with a digit
/// or '.', so signs, blanks, "inf" and "nan" never get in.
bool split_number(std::string_view text, double* value, std::string_view* unit, number_error* why) {
  if (text.empty() || !(is_digit(text[0]) || (text[0] == '.' && text.size() > 1)))
    return fail(why, number_error::not_a_number);
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, *value, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) return fail(why, number_error::too_large);
  if (ec != std::errc() || !std::isfinite(*value)) return fail(why, number_error::not_a_number);
  *unit = std::string_view(ptr, static_cast<size_t>(end - ptr));
  return true;
}

}  // namespace

std::optional<uint64_t> parse_whole(std::string_view text, number_error* why) {
  if (why != nullptr) *why = number_error::none;
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const std::string_view digits = hex ? text.substr(2) : text;
  // from_chars takes neither a sign nor blanks, but would stop early: the whole text must go.
  if (digits.empty()) return none(why, number_error::not_a_number);
  uint64_t v = 0;
  const auto [ptr, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), v, hex ? 16 : 10);
  const bool all = ptr == digits.data() + digits.size();
  if (all && ec == std::errc::result_out_of_range) return none(why, number_error::too_large);
  if (all && ec == std::errc()) return v;
  // "1.5" and "2e3" are numbers, but not written as whole ones (addresses and counts are).
  if (!hex && parse_decimal(text)) return none(why, number_error::not_whole);
  return none(why, number_error::not_a_number);
}

std::optional<double> parse_decimal(std::string_view text, number_error* why) {
  if (why != nullptr) *why = number_error::none;
  double v = 0;
  std::string_view unit;
  if (!split_number(text, &v, &unit, why)) return std::nullopt;
  if (!unit.empty()) return none(why, number_error::not_a_number);
  return v;
}

std::optional<double> duration_unit(std::string_view unit) {
  struct entry {
    const char* name;
    double seconds;
  };
  static constexpr entry units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"µs", 1e-6},
                                    {"ms", 1e-3}, {"s", 1},     {"sec", 1},
                                    {"m", 60},    {"min", 60},  {"h", 3600}};
  for (const entry& u : units)
    if (unit == u.name) return u.seconds;
  return std::nullopt;
}

std::optional<uint64_t> size_unit(std::string_view unit) {
  // "B", then a prefix letter with an optional "i" and an optional "B": 16M = 16Mi = 16MiB = 16MB.
  if (unit == "B" || unit == "b") return 1;
  if (unit.empty()) return std::nullopt;
  std::string_view rest = unit.substr(1);
  if (!rest.empty() && rest[0] == 'i') rest.remove_prefix(1);
  if (!(rest.empty() || rest == "B" || rest == "b")) return std::nullopt;
  switch (unit[0]) {
    case 'k':
    case 'K':
      return uint64_t{1} << 10;
    case 'm':
    case 'M':
      return uint64_t{1} << 20;
    case 'g':
    case 'G':
      return uint64_t{1} << 30;
    case 't':
    case 'T':
      return uint64_t{1} << 40;
    default:
      return std::nullopt;
  }
}

std::optional<double> frequency_unit(std::string_view unit) {
  if (unit == "Hz" || unit == "hz") return 1.0;
  if (unit == "kHz" || unit == "khz" || unit == "k" || unit == "KHz") return 1e3;
  return std::nullopt;
}

namespace {

// A decimal and its unit (`fallback_unit` when there is none), scaled by `unit_scale`.
template <class Scale>
std::optional<double> scaled_decimal(std::string_view text, std::string_view fallback_unit,
                                     Scale unit_scale, number_error* why) {
  if (why != nullptr) *why = number_error::none;
  double v = 0;
  std::string_view unit;
  if (!split_number(text, &v, &unit, why)) return std::nullopt;
  const auto scale = unit_scale(unit.empty() ? fallback_unit : unit);
  if (!scale) return none(why, number_error::not_a_number);
  return v * *scale;
}

}  // namespace

std::optional<double> parse_duration(std::string_view text, std::string_view bare_unit,
                                     number_error* why) {
  return scaled_decimal(text, bare_unit.empty() ? "s" : bare_unit, duration_unit, why);
}

std::optional<uint64_t> parse_size(std::string_view text, std::string_view bare_unit,
                                   number_error* why) {
  if (why != nullptr) *why = number_error::none;
  double v = 0;
  std::string_view unit;
  if (!split_number(text, &v, &unit, why)) return std::nullopt;
  const auto scale = size_unit(unit.empty() ? (bare_unit.empty() ? "B" : bare_unit) : unit);
  if (!scale) return none(why, number_error::not_a_number);
  // Whole numbers exactly (a double holds only 53 bits); fractions through the double.
  const std::string_view number = text.substr(0, text.size() - unit.size());
  if (number.find_first_of(".eE") == std::string_view::npos) {
    uint64_t n = 0;
    const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
    if (ec != std::errc() || ptr != number.data() + number.size())
      return none(why, number_error::too_large);
    if (n > UINT64_MAX / *scale) return none(why, number_error::too_large);
    return n * *scale;
  }
  const double bytes = v * static_cast<double>(*scale);
  if (bytes >= 0x1p64) return none(why, number_error::too_large);
  if (bytes != std::floor(bytes)) return none(why, number_error::not_whole);
  return static_cast<uint64_t>(bytes);
}

std::optional<double> parse_frequency(std::string_view text, number_error* why) {
  return scaled_decimal(text, "Hz", frequency_unit, why);
}

}  // namespace cmdline
