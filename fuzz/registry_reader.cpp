// Fuzzes the remote reader's decoders of foreign data: the ELF symbol lookup (files mapped by
// another process) and the registry read protocol over an arbitrary "target memory" (header at
// 0x1000, anything else from the input), the publisher status area included.
#include <jitunwind/registry_abi.h>

#include "remote/elf_symbols.hpp"
#include "remote/registry_protocol.hpp"

#include <cstring>

using namespace jitunwind;
using namespace jitunwind::remote::detail;

namespace {

// Address space: [0x1000, 0x1000 + size) holds the input; everything else is unmapped.
class input_memory final : public memory_source {
 public:
  input_memory(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  result<void> read(uint64_t address, void* out, size_t n) const override {
    if (address < 0x1000 || address - 0x1000 > size_ || n > size_ - (address - 0x1000)) {
      return error(errc::out_of_range, "unmapped");
    }
    std::memcpy(out, data_ + (address - 0x1000), n);
    return ok_result();
  }
  pid_t pid() const override { return 1; }

 private:
  const uint8_t* data_;
  size_t size_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)find_elf_symbol({data, size}, JITUNWIND_REGISTRY_SYMBOL, "fuzz");
  input_memory memory(data, size);
  remote::registry_snapshot snap;
  remote::read_options options;
  options.max_attempts = 2;
  read_scratch scratch;
  if (read_registry_at(memory, 0x1000, "fuzz", options, snap, scratch).ok()) {
    for (const auto& w : snap.windows) {
      options.max_sframe_size = 1 << 16;
      (void)read_sframe_checked(memory, w, options);
    }
  }
  // The publisher status area the header points to (anywhere in the input).
  remote::publisher_snapshot publishers;
  (void)read_publishers_at(memory, 0x1000, "fuzz", 2, publishers);
  return 0;
}
