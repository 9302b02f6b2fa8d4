// Fuzzes the .note.stapsdt decoder (it reads objects mapped by other processes).
#include <jitunwind/usdt.h>

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto notes = jitunwind::usdt::read_sdt_notes(std::span<const uint8_t>(data, size));
  if (notes) {
    size_t total = 0;
    for (const auto& n : *notes) total += n.provider.size() + n.name.size() + n.args.size();
    (void)total;
  }
  return 0;
}
