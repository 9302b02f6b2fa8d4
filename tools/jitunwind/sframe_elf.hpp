// `sframe build --elf`: an ELF image holding a `.sframe` section and the `.text` it describes.
#pragma once

#include "sframe_json.hpp"

#include <jitunwind/result.h>
#include <jitunwind/sframe.h>

#include <cstdint>
#include <vector>

namespace jitunwind::cli {

struct sframe_elf_image {
  std::vector<uint8_t> bytes;
  uint64_t text_address = 0, text_size = 0;
  bool text_zero_filled = true;  ///< false: `.text` is SHT_NOBITS (too large to zero-fill)
  uint64_t sframe_address = 0;
  size_t sframe_size = 0;
};

/// Above this many bytes of code, `.text` is SHT_NOBITS instead of zero-filled PROGBITS.
inline constexpr uint64_t max_zero_filled_text = 16u << 20;

/// Lays out an ET_DYN image: `.text` at the lowest function start covering every function
/// (PT_LOAD R+X), `.sframe` on the next page (PT_LOAD R, plus PT_GNU_SFRAME), function symbols
/// for named functions. Addresses are final, so the `.sframe` needs no relocations.
/// `options.section_address` is ignored (the layout decides it); `options.target` must be
/// `d.target`.
result<sframe_elf_image> build_sframe_elf(const sframe_description& d,
                                          const sframe::encoder_options& options);

}  // namespace jitunwind::cli
