// jitwalk's jitdump and perf map readers on arbitrary bytes, fed in two pieces (files are read
// while the runtime is still appending to them).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "jitwalk/jit_names.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t split = all.empty() ? 0 : data[0] % (all.size() + 1);
  jitwalk::jit_names names;
  size_t done = 0;
  (void)names.parse_jitdump(all.substr(0, split), done);
  (void)names.parse_jitdump(all, done);
  size_t used = 0;
  names.parse_perf_map(all.substr(0, split), used);
  size_t more = 0;
  names.parse_perf_map(all.substr(used), more);
  for (uint64_t pc : {uint64_t{0}, uint64_t{0x1000}, uint64_t{0x7f0000000000}, ~uint64_t{0}}) {
    (void)names.find(pc);
    (void)names.find(pc, 12345);
  }
  return 0;
}
