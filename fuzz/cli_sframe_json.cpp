// libFuzzer target for `jitunwind sframe build`'s JSON reader (tools/jitunwind/sframe_json.cpp)
// and a round-trip property: every description it accepts encodes, decodes to the same
// functions, and prints as JSON that parses back to the same description.
//
// The tool's sources are compiled in directly (see cli_sframe_input.cpp).
#include "../tools/jitunwind/cli.cpp"
#include "../tools/jitunwind/sframe_json.cpp"

#include <algorithm>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace jitunwind;
  auto d = cli::parse_sframe_json(std::string(reinterpret_cast<const char*>(data), size));
  if (!d) return 0;
  sframe::encoder_options options;
  options.target = d->target;
  // Put the section in the middle of the functions so every accepted start is in reach when
  // the span allows it; out_of_range is a legitimate refusal.
  if (!d->functions.empty()) options.section_address = d->functions.front().start;
  auto bytes = sframe::encode(options, d->functions);
  if (!bytes) {
    if (bytes.error().code() != errc::out_of_range) std::abort();
    return 0;
  }
  auto decoded = sframe::decode(*bytes, options.section_address);
  if (!decoded) std::abort();  // we wrote it, we must read it
  auto sorted = d->functions;
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const function_desc& a, const function_desc& b) { return a.start < b.start; });
  if (decoded->functions != sorted) std::abort();

  cli::sframe_description again = *d;
  again.names.clear();
  again.functions = sorted;
  auto reparsed = cli::parse_sframe_json(cli::to_sframe_json(again));
  if (!reparsed || reparsed->functions != sorted || reparsed->target != d->target) std::abort();
  return 0;
}
