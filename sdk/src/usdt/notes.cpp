// Decoder of `.note.stapsdt` sections. The image comes from another process or from disk and
// is treated as hostile: every offset and size is checked before use.
#include <jitunwind/usdt.h>

#include "common/error.hpp"

#include <elf.h>

#include <cstring>

namespace jitunwind::usdt {

using jitunwind::detail::make_error;

namespace {

template <class T>
bool read_at(std::span<const uint8_t> img, uint64_t off, T& out) {
  if (off > img.size() || img.size() - off < sizeof(T)) return false;
  std::memcpy(&out, img.data() + off, sizeof(T));
  return true;
}

// A NUL-terminated string inside [p, end); nullopt if unterminated.
std::optional<std::string> take_string(const uint8_t*& p, const uint8_t* end) {
  const void* nul = std::memchr(p, 0, static_cast<size_t>(end - p));
  if (nul == nullptr) return std::nullopt;
  std::string s(reinterpret_cast<const char*>(p), static_cast<const uint8_t*>(nul) - p);
  p = static_cast<const uint8_t*>(nul) + 1;
  return s;
}

uint64_t align4(uint64_t v) {
  return (v + 3) & ~uint64_t{3};
}

}  // namespace

result<std::vector<sdt_note>> read_sdt_notes(span<const uint8_t> img) {
  Elf64_Ehdr eh;
  if (!read_at(img, 0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return make_error(errc::malformed, "usdt: not an ELF image (%zu bytes)", img.size());
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return make_error(errc::unsupported,
                      "usdt: only 64-bit little-endian ELF is supported (class %u, data %u)",
                      eh.e_ident[EI_CLASS], eh.e_ident[EI_DATA]);
  if (eh.e_shoff == 0 || eh.e_shnum == 0) return std::vector<sdt_note>{};
  if (eh.e_shentsize != sizeof(Elf64_Shdr))
    return make_error(errc::malformed, "usdt: section header size %u (expected %zu)",
                      eh.e_shentsize, sizeof(Elf64_Shdr));
  if (eh.e_shoff > img.size() || (img.size() - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum)
    return make_error(errc::malformed,
                      "usdt: %u section headers at offset %llu past the end (size %zu)", eh.e_shnum,
                      static_cast<unsigned long long>(eh.e_shoff), img.size());
  auto shdr = [&](size_t i) {
    Elf64_Shdr s;
    read_at(img, eh.e_shoff + i * sizeof(Elf64_Shdr), s);
    return s;
  };
  if (eh.e_shstrndx >= eh.e_shnum)
    return make_error(errc::malformed, "usdt: section name table index %u >= %u sections",
                      eh.e_shstrndx, eh.e_shnum);
  const Elf64_Shdr names = shdr(eh.e_shstrndx);
  if (names.sh_offset > img.size() || img.size() - names.sh_offset < names.sh_size)
    return make_error(errc::malformed, "usdt: section name table [%llu, +%llu) past the end",
                      static_cast<unsigned long long>(names.sh_offset),
                      static_cast<unsigned long long>(names.sh_size));

  std::vector<sdt_note> out;
  static constexpr char wanted[] = ".note.stapsdt";
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr s = shdr(i);
    if (s.sh_type != SHT_NOTE) continue;
    if (s.sh_name >= names.sh_size || names.sh_size - s.sh_name < sizeof wanted ||
        std::memcmp(img.data() + names.sh_offset + s.sh_name, wanted, sizeof wanted) != 0)
      continue;
    if (s.sh_offset > img.size() || img.size() - s.sh_offset < s.sh_size)
      return make_error(errc::malformed,
                        "usdt: section %zu (.note.stapsdt) [%llu, +%llu) past "
                        "the end of the image (size %zu)",
                        i, static_cast<unsigned long long>(s.sh_offset),
                        static_cast<unsigned long long>(s.sh_size), img.size());
    const std::span<const uint8_t> sec = img.subspan(s.sh_offset, s.sh_size);
    uint64_t pos = 0;
    for (size_t k = 0; pos < sec.size(); ++k) {
      Elf64_Nhdr nh;
      if (!read_at(sec, pos, nh))
        return make_error(errc::malformed,
                          "usdt: note %zu: header at %llu past the section "
                          "end (%zu)",
                          k, static_cast<unsigned long long>(pos), sec.size());
      const uint64_t name_off = pos + sizeof nh;
      const uint64_t desc_off = name_off + align4(nh.n_namesz);
      const uint64_t next = desc_off + align4(nh.n_descsz);
      if (next > sec.size())
        return make_error(errc::malformed,
                          "usdt: note %zu: name size %u and descriptor size %u run past the "
                          "section end (%zu)",
                          k, nh.n_namesz, nh.n_descsz, sec.size());
      pos = next;
      if (nh.n_type != 3 || nh.n_namesz != 8 ||
          std::memcmp(sec.data() + name_off, "stapsdt", 8) != 0)
        continue;  // someone else's note
      if (nh.n_descsz < 3 * 8)
        return make_error(errc::malformed, "usdt: note %zu: descriptor size %u < 24", k,
                          nh.n_descsz);
      sdt_note n;
      read_at(sec, desc_off, n.pc);
      read_at(sec, desc_off + 8, n.base);
      read_at(sec, desc_off + 16, n.semaphore);
      const uint8_t* p = sec.data() + desc_off + 24;
      const uint8_t* end = sec.data() + desc_off + nh.n_descsz;
      auto prov = take_string(p, end);
      auto name = prov ? take_string(p, end) : std::nullopt;
      auto args = name ? take_string(p, end) : std::nullopt;
      if (!args)
        return make_error(errc::malformed,
                          "usdt: note %zu: provider, name and arguments are not three "
                          "NUL-terminated strings within the %u-byte descriptor",
                          k, nh.n_descsz);
      n.provider = std::move(*prov);
      n.name = std::move(*name);
      n.args = std::move(*args);
      out.push_back(std::move(n));
    }
  }
  return out;
}

}  // namespace jitunwind::usdt
