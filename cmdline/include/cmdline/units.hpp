// Numbers as users type them on a command line: whole numbers (decimal or 0x-hex), decimals
// ("1.5"), durations ("500ms", "2s"), sizes ("16M", "1Gi") and frequencies ("99", "1kHz").
// Part of the cmdline library (cmdline.hpp says why it lives outside the SDK).
//
// Every parser reads the whole text or nothing: no sign, no blank, no trailing character, no
// "inf"/"nan", so that a typo is an error and never a different number. Thread-safe (no state).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace cmdline {

/// Why a text is not a number of the wanted kind.
enum class number_error : uint8_t {
  none,
  not_a_number,  ///< no digits where they belong, or a unit this kind does not know
  too_large,     ///< digits after all, but more than the type holds
  not_whole,     ///< a fraction where only whole units make sense ("1.5" as a count, "0.3k" bytes)
};

/// A whole number in decimal or 0x-hexadecimal digits, 0 to 2^64-1 ("1.5" and "2e3" are
/// not_whole: a count or an address is written in digits).
std::optional<uint64_t> parse_whole(std::string_view text, number_error* why = nullptr);

/// A non-negative decimal ("3", "1.5", ".5", "2e3").
std::optional<double> parse_decimal(std::string_view text, number_error* why = nullptr);

/// A duration in seconds: a decimal with an optional unit ns, us, ms, s, m (minutes), h; a bare
/// number is in `bare_unit` (one of those; "s" if empty). "1.5" with bare unit "s" is 1.5,
/// "500ms" is 0.5, "2m" is 120.
std::optional<double> parse_duration(std::string_view text, std::string_view bare_unit = "s",
                                     number_error* why = nullptr);

/// A size in bytes: a decimal with an optional unit B, k/K, M, G, T, each optionally followed by
/// "i" and/or "B" ("16M", "16MiB", "16MB", "1Gi", "64k"). Every unit is a power of 1024, as in
/// ulimit, dd's K and the kernel's memory settings: a 16M buffer is 16 MiB. A bare number is in
/// `bare_unit` ("B" if empty, or e.g. "MiB"). The result must be whole bytes.
std::optional<uint64_t> parse_size(std::string_view text, std::string_view bare_unit = "B",
                                   number_error* why = nullptr);

/// A frequency in Hz: a decimal with an optional unit Hz or kHz ("99", "99Hz", "1.5kHz").
std::optional<double> parse_frequency(std::string_view text, number_error* why = nullptr);

/// The multiplier of a duration unit to seconds, of a size unit to bytes, of a frequency unit
/// to Hz; nothing for an unknown unit.
std::optional<double> duration_unit(std::string_view unit);
std::optional<uint64_t> size_unit(std::string_view unit);
std::optional<double> frequency_unit(std::string_view unit);

}  // namespace cmdline
