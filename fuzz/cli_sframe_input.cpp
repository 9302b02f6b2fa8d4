// libFuzzer target for the CLI's SFrame input path: ELF bytes → section lookup, relocation
// resolution of relocatable objects (tools/jitunwind/sframe_input.cpp) → decode → both output
// formats. Any input must give a value or a clean error, never a crash or a sanitizer report.
//
// The tool's sources are compiled in directly: fuzz/CMakeLists.txt builds each fuzz/*.cpp on
// its own against the SDK, and the CLI code is not part of the SDK library.
#include "../tools/jitunwind/cli.cpp"
#include "../tools/jitunwind/sframe_input.cpp"
#include "../tools/jitunwind/sframe_json.cpp"
#include "../tools/jitunwind/sframe_text.cpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace jitunwind;
  for (bool raw : {false, true}) {
    cli::sframe_source_options options;
    options.raw = raw;
    auto source =
        cli::load_sframe_source("fuzz-input", std::vector<uint8_t>(data, data + size), options);
    if (!source) continue;
    auto decoded = sframe::decode(source->bytes, source->address);
    if (!decoded) continue;
    (void)cli::render_sframe_text("fuzz-input", *source, *decoded);
    cli::sframe_description d;
    d.target = decoded->info.target;
    d.version = decoded->info.version;
    d.flags = decoded->info.flags;
    for (const function_desc& f : decoded->functions) {
      auto it = source->function_symbols.find(f.start);
      d.names.push_back(it == source->function_symbols.end() ? std::string() : it->second);
    }
    d.functions = decoded->functions;
    (void)cli::to_sframe_json(d);
  }
  return 0;
}
