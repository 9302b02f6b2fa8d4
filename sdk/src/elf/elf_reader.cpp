#include "elf/elf_reader.hpp"

#include "common/error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace jitunwind::detail {

namespace {

using ull = unsigned long long;

constexpr uint16_t shn_xindex = 0xffff;
constexpr uint16_t pn_xnum = 0xffff;

// [offset, offset + size) lies inside a buffer of `total` bytes (no overflow).
bool in_bounds(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

// A NUL-terminated string at `index` of a string table, or an error naming `what`.
result<std::string> string_at(std::span<const uint8_t> strtab, uint64_t index, const char* what) {
  if (index >= strtab.size())
    return make_error(errc::malformed, "elf: %s: name offset %llu past string table (%zu bytes)",
                      what, static_cast<ull>(index), strtab.size());
  const auto* begin = reinterpret_cast<const char*>(strtab.data()) + index;
  const void* nul = std::memchr(begin, 0, strtab.size() - index);
  if (nul == nullptr)
    return make_error(errc::malformed,
                      "elf: %s: name at offset %llu is not NUL-terminated inside the string table",
                      what, static_cast<ull>(index));
  return std::string(begin, static_cast<const char*>(nul));
}

}  // namespace

uint64_t elf_image::read_uint(const uint8_t* p, size_t width) const noexcept {
  uint64_t v = 0;
  if (big_endian_) {
    for (size_t i = 0; i < width; ++i) v = (v << 8) | p[i];
  } else {
    for (size_t i = width; i > 0; --i) v = (v << 8) | p[i - 1];
  }
  return v;
}

result<elf_image> elf_image::parse(std::span<const uint8_t> bytes) {
  elf_image img;
  img.bytes_ = bytes;
  if (bytes.size() < 4 || bytes[0] != 0x7f || bytes[1] != 'E' || bytes[2] != 'L' ||
      bytes[3] != 'F')
    return make_error(errc::malformed, "elf: no ELF magic (file of %zu bytes)", bytes.size());
  if (bytes.size() < 16)
    return make_error(errc::malformed,
                      "elf: file of %zu bytes is too short for the 16-byte ELF identification",
                      bytes.size());
  const uint8_t cls = bytes[4], data = bytes[5];
  if (cls != 1 && cls != 2)
    return make_error(errc::malformed, "elf: bad class %u (expected 1 = ELF32 or 2 = ELF64)", cls);
  if (data != 1 && data != 2)
    return make_error(errc::malformed, "elf: bad data encoding %u (expected 1 = LE or 2 = BE)",
                      data);
  img.is_64_ = cls == 2;
  img.big_endian_ = data == 2;
  const size_t ehsize = img.is_64_ ? 64 : 52;
  if (bytes.size() < ehsize)
    return make_error(errc::malformed, "elf: file of %zu bytes is shorter than the ELF%d header",
                      bytes.size(), img.is_64_ ? 64 : 32);
  const uint8_t* h = bytes.data();
  const size_t w = img.is_64_ ? 8 : 4;
  img.type_ = static_cast<uint16_t>(img.read_uint(h + 16, 2));
  img.machine_ = static_cast<uint16_t>(img.read_uint(h + 18, 2));
  img.entry_ = img.read_uint(h + 24, w);
  img.phoff_ = img.read_uint(h + 24 + w, w);
  img.shoff_ = img.read_uint(h + 24 + 2 * w, w);
  const uint8_t* tail = h + 24 + 3 * w + 4;  // after e_flags
  img.phentsize_ = static_cast<uint16_t>(img.read_uint(tail + 2, 2));
  img.phnum_ = img.read_uint(tail + 4, 2);
  img.shentsize_ = static_cast<uint16_t>(img.read_uint(tail + 6, 2));
  img.shnum_ = img.read_uint(tail + 8, 2);
  img.shstrndx_ = static_cast<uint16_t>(img.read_uint(tail + 10, 2));

  if (auto r = img.parse_sections(); !r) return std::move(r).error();
  if (auto r = img.parse_segments(); !r) return std::move(r).error();
  return img;
}

result<void> elf_image::parse_sections() {
  if (shoff_ == 0) {
    if (shnum_ != 0)
      return make_error(errc::malformed, "elf: %llu section headers but e_shoff is 0",
                        static_cast<ull>(shnum_));
    return {};
  }
  const size_t want = is_64_ ? 64 : 40;
  if (shentsize_ != want)
    return make_error(errc::malformed, "elf: section header size %u (expected %zu)", shentsize_,
                      want);
  if (!in_bounds(shoff_, want, bytes_.size()))
    return make_error(errc::malformed,
                      "elf: section header table at 0x%llx past end of file (0x%zx bytes)",
                      static_cast<ull>(shoff_), bytes_.size());
  // Extended numbering: section 0 carries the real count and string table index.
  const uint8_t* s0 = bytes_.data() + shoff_;
  const size_t w = is_64_ ? 8 : 4;
  uint64_t shstrndx = shstrndx_;
  if (shnum_ == 0) shnum_ = read_uint(s0 + 8 + 3 * w, w);               // sh_size of section 0
  if (shstrndx == shn_xindex) shstrndx = read_uint(s0 + 8 + 4 * w, 4);  // sh_link
  if (phnum_ == pn_xnum) phnum_ = read_uint(s0 + 12 + 4 * w, 4);        // sh_info
  if (shnum_ > (bytes_.size() - shoff_) / want)
    return make_error(errc::malformed,
                      "elf: section header table (%llu entries at 0x%llx) past end of file "
                      "(0x%zx bytes)",
                      static_cast<ull>(shnum_), static_cast<ull>(shoff_), bytes_.size());
  sections_.reserve(shnum_);
  std::vector<uint32_t> name_offsets;
  name_offsets.reserve(shnum_);
  for (uint64_t i = 0; i < shnum_; ++i) {
    const uint8_t* p = bytes_.data() + shoff_ + i * want;
    elf_section s;
    s.index = static_cast<uint32_t>(i);
    name_offsets.push_back(static_cast<uint32_t>(read_uint(p, 4)));
    s.type = static_cast<uint32_t>(read_uint(p + 4, 4));
    s.flags = read_uint(p + 8, w);
    s.addr = read_uint(p + 8 + w, w);
    s.offset = read_uint(p + 8 + 2 * w, w);
    s.size = read_uint(p + 8 + 3 * w, w);
    s.link = static_cast<uint32_t>(read_uint(p + 8 + 4 * w, 4));
    s.info = static_cast<uint32_t>(read_uint(p + 12 + 4 * w, 4));
    s.addralign = read_uint(p + 16 + 4 * w, w);
    s.entsize = read_uint(p + 16 + 5 * w, w);
    sections_.push_back(std::move(s));
  }
  if (shnum_ == 0 || shstrndx == 0) return {};  // no sections, or no section names
  if (shstrndx >= shnum_)
    return make_error(errc::malformed,
                      "elf: section name table index %llu out of range (%llu sections)",
                      static_cast<ull>(shstrndx), static_cast<ull>(shnum_));
  auto strtab = section_data(sections_[shstrndx]);
  if (!strtab) return std::move(strtab).error();
  for (uint64_t i = 1; i < shnum_; ++i) {
    const std::string what = format("section %llu", static_cast<ull>(i));
    auto name = string_at(*strtab, name_offsets[i], what.c_str());
    if (!name) return std::move(name).error();
    sections_[i].name = std::move(*name);
  }
  return {};
}

result<void> elf_image::parse_segments() {
  if (phnum_ == 0) return {};
  const size_t want = is_64_ ? 56 : 32;
  if (phentsize_ != want)
    return make_error(errc::malformed, "elf: program header size %u (expected %zu)", phentsize_,
                      want);
  if (phoff_ > bytes_.size() || phnum_ > (bytes_.size() - phoff_) / want)
    return make_error(errc::malformed,
                      "elf: program header table (%llu entries at 0x%llx) past end of file "
                      "(0x%zx bytes)",
                      static_cast<ull>(phnum_), static_cast<ull>(phoff_), bytes_.size());
  segments_.reserve(phnum_);
  for (uint64_t i = 0; i < phnum_; ++i) {
    const uint8_t* p = bytes_.data() + phoff_ + i * want;
    elf_segment s;
    s.index = static_cast<uint32_t>(i);
    s.type = static_cast<uint32_t>(read_uint(p, 4));
    if (is_64_) {
      s.flags = static_cast<uint32_t>(read_uint(p + 4, 4));
      s.offset = read_uint(p + 8, 8);
      s.vaddr = read_uint(p + 16, 8);
      s.paddr = read_uint(p + 24, 8);
      s.filesz = read_uint(p + 32, 8);
      s.memsz = read_uint(p + 40, 8);
      s.align = read_uint(p + 48, 8);
    } else {
      s.offset = read_uint(p + 4, 4);
      s.vaddr = read_uint(p + 8, 4);
      s.paddr = read_uint(p + 12, 4);
      s.filesz = read_uint(p + 16, 4);
      s.memsz = read_uint(p + 20, 4);
      s.flags = static_cast<uint32_t>(read_uint(p + 24, 4));
      s.align = read_uint(p + 28, 4);
    }
    segments_.push_back(s);
  }
  return {};
}

const elf_section* elf_image::find_section(std::string_view name) const noexcept {
  for (const auto& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

const elf_segment* elf_image::find_segment(uint32_t type) const noexcept {
  for (const auto& p : segments_)
    if (p.type == type) return &p;
  return nullptr;
}

result<std::span<const uint8_t>> elf_image::section_data(const elf_section& s) const {
  if (s.type == elf_sht_nobits || s.type == 0) return std::span<const uint8_t>{};
  if (!in_bounds(s.offset, s.size, bytes_.size()))
    return make_error(errc::malformed,
                      "elf: section %u (%s): data [0x%llx, +0x%llx) past end of file (0x%zx bytes)",
                      s.index, s.name.empty() ? "?" : s.name.c_str(), static_cast<ull>(s.offset),
                      static_cast<ull>(s.size), bytes_.size());
  return bytes_.subspan(s.offset, s.size);
}

result<std::span<const uint8_t>> elf_image::segment_data(const elf_segment& p) const {
  if (!in_bounds(p.offset, p.filesz, bytes_.size()))
    return make_error(errc::malformed,
                      "elf: program header %u: data [0x%llx, +0x%llx) past end of file (0x%zx "
                      "bytes)",
                      p.index, static_cast<ull>(p.offset), static_cast<ull>(p.filesz),
                      bytes_.size());
  return bytes_.subspan(p.offset, p.filesz);
}

result<std::vector<elf_symbol>> elf_image::symbols(const elf_section& symtab) const {
  if (symtab.type != elf_sht_symtab && symtab.type != elf_sht_dynsym)
    return make_error(errc::invalid_argument,
                      "elf: section %u (%s) is not a symbol table (type %u)", symtab.index,
                      symtab.name.c_str(), symtab.type);
  const size_t ent = is_64_ ? 24 : 16;
  if (symtab.link >= sections_.size())
    return make_error(errc::malformed, "elf: section %u (%s): string table index %u out of range",
                      symtab.index, symtab.name.c_str(), symtab.link);
  auto data = section_data(symtab);
  if (!data) return std::move(data).error();
  auto strtab = section_data(sections_[symtab.link]);
  if (!strtab) return std::move(strtab).error();
  const size_t n = data->size() / ent;
  std::vector<elf_symbol> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = data->data() + i * ent;
    elf_symbol s;
    uint64_t name_off = read_uint(p, 4);
    uint8_t info;
    if (is_64_) {
      info = p[4];
      s.shndx = static_cast<uint16_t>(read_uint(p + 6, 2));
      s.value = read_uint(p + 8, 8);
      s.size = read_uint(p + 16, 8);
    } else {
      s.value = read_uint(p + 4, 4);
      s.size = read_uint(p + 8, 4);
      info = p[12];
      s.shndx = static_cast<uint16_t>(read_uint(p + 14, 2));
    }
    s.type = info & 0xf;
    s.bind = info >> 4;
    if (name_off != 0) {
      const std::string what = format("%s symbol %zu", symtab.name.c_str(), i);
      auto name = string_at(*strtab, name_off, what.c_str());
      if (!name) return std::move(name).error();
      s.name = std::move(*name);
    }
    out.push_back(std::move(s));
  }
  return out;
}

result<std::vector<elf_relocation>> elf_image::relocations(const elf_section& rel) const {
  const bool rela = rel.type == elf_sht_rela;
  if (!rela && rel.type != elf_sht_rel)
    return make_error(errc::invalid_argument,
                      "elf: section %u (%s) is not a relocation section (type %u)", rel.index,
                      rel.name.c_str(), rel.type);
  const size_t w = is_64_ ? 8 : 4;
  const size_t ent = rela ? 3 * w : 2 * w;
  auto data = section_data(rel);
  if (!data) return std::move(data).error();
  const size_t n = data->size() / ent;
  std::vector<elf_relocation> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = data->data() + i * ent;
    elf_relocation r;
    r.offset = read_uint(p, w);
    const uint64_t info = read_uint(p + w, w);
    if (is_64_) {
      r.symbol = static_cast<uint32_t>(info >> 32);
      r.type = static_cast<uint32_t>(info);
    } else {
      r.symbol = static_cast<uint32_t>(info >> 8);
      r.type = static_cast<uint32_t>(info & 0xff);
    }
    if (rela) {
      const uint64_t a = read_uint(p + 2 * w, w);
      r.addend = is_64_ ? static_cast<int64_t>(a) : static_cast<int32_t>(static_cast<uint32_t>(a));
    }
    out.push_back(r);
  }
  return out;
}

std::optional<uint64_t> elf_image::first_load_vaddr() const noexcept {
  std::optional<uint64_t> lowest;
  for (const auto& p : segments_) {
    if (p.type != elf_pt_load) continue;
    uint64_t v = p.vaddr;
    // Only power-of-two alignments mean anything; others are ignored as the loader would fail.
    if (p.align > 1 && (p.align & (p.align - 1)) == 0) v &= ~(p.align - 1);
    if (!lowest || v < *lowest) lowest = v;
  }
  return lowest;
}

std::optional<uint64_t> elf_image::vaddr_to_offset(uint64_t vaddr) const noexcept {
  for (const auto& p : segments_) {
    if (p.type != elf_pt_load) continue;
    if (vaddr >= p.vaddr && vaddr - p.vaddr < p.filesz) return p.offset + (vaddr - p.vaddr);
  }
  return std::nullopt;
}

result<std::vector<uint8_t>> read_whole_file(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return make_error(errc::io_error, "cannot open %s: %s", path.c_str(), std::strerror(errno));
  std::vector<uint8_t> out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
      ::close(fd);
      return make_error(errc::limit_exceeded, "%s: %lld bytes is more than the limit of %zu",
                        path.c_str(), static_cast<long long>(st.st_size), max_bytes);
    }
    out.reserve(static_cast<size_t>(st.st_size));
  }
  uint8_t buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      return make_error(errc::io_error, "cannot read %s: %s", path.c_str(), std::strerror(e));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      return make_error(errc::limit_exceeded, "%s: more than the limit of %zu bytes", path.c_str(),
                        max_bytes);
    }
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return out;
}

std::string elf_machine_name(uint16_t machine) {
  switch (machine) {
    case elf_em_x86_64:
      return "x86-64";
    case elf_em_aarch64:
      return "aarch64";
    case elf_em_386:
      return "i386";
  }
  return format("machine %u", machine);
}

}  // namespace jitunwind::detail
