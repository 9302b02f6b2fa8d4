#include "remote/elf_symbols.hpp"

#include "common/error.hpp"

namespace jitunwind::remote::detail {

using jitunwind::toolkit::elf_image;
using jitunwind::detail::make_error;

result<std::optional<elf_symbol_match>> find_elf_symbol(const elf_image& image,
                                                        std::string_view name,
                                                        const std::string& what) {
  if (!image.is_64bit() || image.big_endian())
    return make_error(errc::unsupported, "%s: not a little-endian 64-bit ELF file", what.c_str());
  constexpr uint8_t stt_object = 1;
  for (auto [type, kind] : {std::pair{jitunwind::toolkit::elf_sht_dynsym, symbol_table::dynsym},
                            std::pair{jitunwind::toolkit::elf_sht_symtab, symbol_table::symtab}}) {
    const auto* table = image.first_section_of_type(type);
    if (table == nullptr) continue;
    auto found = image.find_symbol(*table, name, stt_object);
    if (!found)
      return make_error(found.error().code(), "%s: %s", what.c_str(),
                        found.error().message().c_str());
    if (!found->has_value()) continue;
    elf_symbol_match m;
    m.value = (*found)->value;
    m.size = (*found)->size;
    m.table = kind;
    for (const auto& p : image.segments())
      if (p.type == jitunwind::toolkit::elf_pt_load)
        m.loads.push_back({p.vaddr, p.offset, p.filesz, p.memsz});
    return std::optional<elf_symbol_match>(std::move(m));
  }
  return std::optional<elf_symbol_match>();
}

result<std::optional<elf_symbol_match>> find_elf_symbol(std::span<const uint8_t> bytes,
                                                        std::string_view name,
                                                        const std::string& what) {
  auto image = elf_image::parse(bytes);
  if (!image)
    return make_error(image.error().code(), "%s: %s", what.c_str(),
                      image.error().message().c_str());
  return find_elf_symbol(*image, name, what);
}

}  // namespace jitunwind::remote::detail
