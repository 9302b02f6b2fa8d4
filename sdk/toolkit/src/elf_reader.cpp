#include <jitunwind/toolkit/elf_reader.hpp>

#include <jitunwind/toolkit/format.hpp>

#include <algorithm>
#include <cstring>

namespace jitunwind::toolkit {

namespace {

using ull = unsigned long long;

constexpr uint16_t shn_xindex = 0xffff;
constexpr uint16_t pn_xnum = 0xffff;

// [offset, offset + size) lies inside a buffer of `total` bytes (no overflow).
bool in_bounds(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

// Names from one string table, materialized at most to 4 times its size plus 1 MiB in total: a
// table whose entries all point at one long name is refused instead of copied per entry.
class string_table {
 public:
  explicit string_table(elf_data data)
      : data_(std::move(data)), left_(4 * static_cast<uint64_t>(data_.size()) + (1u << 20)) {}

  // The NUL-terminated string at `index`, or an error naming `what`.
  result<std::string> at(uint64_t index, const char* what) {
    if (index >= data_.size())
      return make_error(errc::malformed, "elf: %s: name offset %llu past string table (%zu bytes)",
                        what, static_cast<ull>(index), data_.size());
    const auto* begin = reinterpret_cast<const char*>(data_.data()) + index;
    const void* nul = std::memchr(begin, 0, data_.size() - index);
    if (nul == nullptr)
      return make_error(errc::malformed,
                        "elf: %s: name at offset %llu is not NUL-terminated inside the string "
                        "table",
                        what, static_cast<ull>(index));
    const size_t length = static_cast<size_t>(static_cast<const char*>(nul) - begin);
    if (length > left_)
      return make_error(errc::limit_exceeded,
                        "elf: %s: names add up to more than 4 times their string table (%zu "
                        "bytes) plus 1 MiB: entries share names (a hostile file?)",
                        what, data_.size());
    left_ -= length;
    return std::string(begin, length);
  }

  // Whether the string at `index` is `name` (no copy, no budget).
  bool equals(uint64_t index, std::string_view name) const {
    if (index >= data_.size() || data_.size() - index < name.size() + 1) return false;
    const auto* s = reinterpret_cast<const char*>(data_.data()) + index;
    return std::memcmp(s, name.data(), name.size()) == 0 && s[name.size()] == '\0';
  }

 private:
  elf_data data_;
  uint64_t left_;
};

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

// Where the bytes come from: memory the caller keeps alive, or a file read with pread.
struct elf_image::source {
  std::span<const uint8_t> memory;
  std::optional<guarded_file> file;
  elf_read_limits limits;
  uint64_t size = 0;

  // [offset, +n) must be inside the image (callers check, with messages of their own).
  result<elf_data> read(uint64_t offset, uint64_t n, const char* what) const {
    if (!in_bounds(offset, n, size))
      return make_error(errc::malformed,
                        "elf: %s: [0x%llx, +0x%llx) past end of file (0x%llx bytes)", what,
                        static_cast<ull>(offset), static_cast<ull>(n), static_cast<ull>(size));
    if (!file) return elf_data(memory.subspan(offset, n));
    if (n > limits.max_read)
      return make_error(errc::limit_exceeded, "%s: %s of %s is more than the limit of %s",
                        file->path().c_str(), what, size_text(n).c_str(),
                        size_text(limits.max_read).c_str());
    auto bytes = file->read_range(offset, n, limits.budget, file->path() + ": " + what);
    if (!bytes) return std::move(bytes).error();
    auto owner = std::make_shared<const charged_bytes>(std::move(*bytes));
    return elf_data(owner->bytes, owner);
  }
};

uint64_t elf_image::file_size() const noexcept {
  return source_->size;
}

result<elf_data> elf_image::read(uint64_t offset, uint64_t size, const char* what) const {
  return source_->read(offset, size, what);
}

result<elf_image> elf_image::parse(std::span<const uint8_t> bytes) {
  auto src = std::make_shared<source>();
  src->memory = bytes;
  src->size = bytes.size();
  return parse_from(std::move(src));
}

result<elf_image> elf_image::open(guarded_file file, const elf_read_limits& limits) {
  auto src = std::make_shared<source>();
  src->size = file.size();
  src->limits = limits;
  const std::string path = file.path();
  src->file.emplace(std::move(file));
  auto img = parse_from(std::move(src));
  if (!img && img.error().message().rfind("elf: ", 0) == 0)
    return make_error(img.error().code(), "%s: %s", path.c_str(), img.error().message().c_str());
  return img;
}

result<elf_image> elf_image::parse_from(std::shared_ptr<const source> src) {
  elf_image img;
  img.source_ = std::move(src);
  const uint64_t size = img.source_->size;
  uint8_t h[64] = {};
  {
    auto head = img.source_->read(0, std::min<uint64_t>(size, sizeof h), "ELF header");
    if (!head) return std::move(head).error();
    if (!head->empty()) std::memcpy(h, head->data(), head->size());
  }
  if (size < 4 || h[0] != 0x7f || h[1] != 'E' || h[2] != 'L' || h[3] != 'F')
    return make_error(errc::malformed, "elf: no ELF magic (file of %llu bytes)",
                      static_cast<ull>(size));
  if (size < 16)
    return make_error(errc::malformed,
                      "elf: file of %llu bytes is too short for the 16-byte ELF identification",
                      static_cast<ull>(size));
  const uint8_t cls = h[4], data = h[5];
  if (cls != 1 && cls != 2)
    return make_error(errc::malformed, "elf: bad class %u (expected 1 = ELF32 or 2 = ELF64)", cls);
  if (data != 1 && data != 2)
    return make_error(errc::malformed, "elf: bad data encoding %u (expected 1 = LE or 2 = BE)",
                      data);
  img.is_64_ = cls == 2;
  img.big_endian_ = data == 2;
  const size_t ehsize = img.is_64_ ? 64 : 52;
  if (size < ehsize)
    return make_error(errc::malformed, "elf: file of %llu bytes is shorter than the ELF%d header",
                      static_cast<ull>(size), img.is_64_ ? 64 : 32);
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
  const uint64_t size = source_->size;
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
  if (!in_bounds(shoff_, want, size))
    return make_error(errc::malformed,
                      "elf: section header table at 0x%llx past end of file (0x%llx bytes)",
                      static_cast<ull>(shoff_), static_cast<ull>(size));
  // Extended numbering: section 0 carries the real count and string table index.
  const size_t w = is_64_ ? 8 : 4;
  uint64_t shstrndx = shstrndx_;
  {
    auto first = source_->read(shoff_, want, "section header 0");
    if (!first) return std::move(first).error();
    const uint8_t* s0 = first->data();
    if (shnum_ == 0) shnum_ = read_uint(s0 + 8 + 3 * w, w);               // sh_size of section 0
    if (shstrndx == shn_xindex) shstrndx = read_uint(s0 + 8 + 4 * w, 4);  // sh_link
    if (phnum_ == pn_xnum) phnum_ = read_uint(s0 + 12 + 4 * w, 4);        // sh_info
  }
  if (shnum_ > (size - shoff_) / want)
    return make_error(errc::malformed,
                      "elf: section header table (%llu entries at 0x%llx) past end of file "
                      "(0x%llx bytes)",
                      static_cast<ull>(shnum_), static_cast<ull>(shoff_), static_cast<ull>(size));
  auto table = source_->read(shoff_, shnum_ * want, "section header table");
  if (!table) return std::move(table).error();
  sections_.reserve(shnum_);
  std::vector<uint32_t> name_offsets;
  name_offsets.reserve(shnum_);
  for (uint64_t i = 0; i < shnum_; ++i) {
    const uint8_t* p = table->data() + i * want;
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
  string_table names(std::move(*strtab));
  for (uint64_t i = 1; i < shnum_; ++i) {
    const std::string what = format("section %llu", static_cast<ull>(i));
    auto name = names.at(name_offsets[i], what.c_str());
    if (!name) return std::move(name).error();
    sections_[i].name = std::move(*name);
  }
  return {};
}

result<void> elf_image::parse_segments() {
  if (phnum_ == 0) return {};
  const uint64_t size = source_->size;
  const size_t want = is_64_ ? 56 : 32;
  if (phentsize_ != want)
    return make_error(errc::malformed, "elf: program header size %u (expected %zu)", phentsize_,
                      want);
  if (phoff_ > size || phnum_ > (size - phoff_) / want)
    return make_error(errc::malformed,
                      "elf: program header table (%llu entries at 0x%llx) past end of file "
                      "(0x%llx bytes)",
                      static_cast<ull>(phnum_), static_cast<ull>(phoff_), static_cast<ull>(size));
  auto table = source_->read(phoff_, phnum_ * want, "program header table");
  if (!table) return std::move(table).error();
  segments_.reserve(phnum_);
  for (uint64_t i = 0; i < phnum_; ++i) {
    const uint8_t* p = table->data() + i * want;
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

const elf_section* elf_image::first_section_of_type(uint32_t type) const noexcept {
  for (const auto& s : sections_)
    if (s.type == type) return &s;
  return nullptr;
}

result<elf_data> elf_image::section_data(const elf_section& s) const {
  if (s.type == elf_sht_nobits || s.type == 0) return elf_data{};
  if (!in_bounds(s.offset, s.size, source_->size))
    return make_error(errc::malformed,
                      "elf: section %u (%s): data [0x%llx, +0x%llx) past end of file (0x%llx "
                      "bytes)",
                      s.index, s.name.empty() ? "?" : s.name.c_str(), static_cast<ull>(s.offset),
                      static_cast<ull>(s.size), static_cast<ull>(source_->size));
  const std::string what = "section " + (s.name.empty() ? std::to_string(s.index) : s.name);
  return source_->read(s.offset, s.size, what.c_str());
}

result<elf_data> elf_image::segment_data(const elf_segment& p) const {
  if (!in_bounds(p.offset, p.filesz, source_->size))
    return make_error(errc::malformed,
                      "elf: program header %u: data [0x%llx, +0x%llx) past end of file (0x%llx "
                      "bytes)",
                      p.index, static_cast<ull>(p.offset), static_cast<ull>(p.filesz),
                      static_cast<ull>(source_->size));
  const std::string what = format("program header %u", p.index);
  return source_->read(p.offset, p.filesz, what.c_str());
}

// The data of a symbol table and (into `strings`) of its string table.
result<elf_data> elf_image::symbol_table_data(const elf_section& symtab, elf_data& strings) const {
  if (symtab.type != elf_sht_symtab && symtab.type != elf_sht_dynsym)
    return make_error(errc::invalid_argument,
                      "elf: section %u (%s) is not a symbol table (type %u)", symtab.index,
                      symtab.name.c_str(), symtab.type);
  if (symtab.link >= sections_.size())
    return make_error(errc::malformed, "elf: section %u (%s): string table index %u out of range",
                      symtab.index, symtab.name.c_str(), symtab.link);
  auto data = section_data(symtab);
  if (!data) return std::move(data).error();
  auto strtab = section_data(sections_[symtab.link]);
  if (!strtab) return std::move(strtab).error();
  strings = std::move(*strtab);
  return data;
}

namespace {

// One symbol entry (name offset returned separately).
elf_symbol decode_symbol(const elf_image& img, const uint8_t* p, uint64_t& name_off) {
  elf_symbol s;
  name_off = img.read_uint(p, 4);
  uint8_t info;
  if (img.is_64bit()) {
    info = p[4];
    s.shndx = static_cast<uint16_t>(img.read_uint(p + 6, 2));
    s.value = img.read_uint(p + 8, 8);
    s.size = img.read_uint(p + 16, 8);
  } else {
    s.value = img.read_uint(p + 4, 4);
    s.size = img.read_uint(p + 8, 4);
    info = p[12];
    s.shndx = static_cast<uint16_t>(img.read_uint(p + 14, 2));
  }
  s.type = info & 0xf;
  s.bind = info >> 4;
  return s;
}

}  // namespace

result<std::vector<elf_symbol>> elf_image::symbols(const elf_section& symtab) const {
  elf_data strtab;
  auto data = symbol_table_data(symtab, strtab);
  if (!data) return std::move(data).error();
  string_table names(std::move(strtab));
  const size_t ent = is_64_ ? 24 : 16;
  const size_t n = data->size() / ent;
  std::vector<elf_symbol> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t name_off = 0;
    elf_symbol s = decode_symbol(*this, data->data() + i * ent, name_off);
    if (name_off != 0) {
      auto name = names.at(name_off, "symbol");
      // Named only on failure: formatting it per symbol cost more than the lookup (node: 185 000)
      if (!name)
        return make_error(name.error().code(), "%s (%s symbol %zu)", name.error().message().c_str(),
                          symtab.name.c_str(), i);
      s.name = std::move(*name);
    }
    out.push_back(std::move(s));
  }
  return out;
}

result<std::optional<elf_symbol>> elf_image::find_symbol(const elf_section& symtab,
                                                         std::string_view name,
                                                         std::optional<uint8_t> type) const {
  elf_data strtab;
  auto data = symbol_table_data(symtab, strtab);
  if (!data) return std::move(data).error();
  const string_table names(std::move(strtab));
  const size_t ent = is_64_ ? 24 : 16;
  const size_t n = data->size() / ent;
  for (size_t i = 0; i < n; ++i) {
    uint64_t name_off = 0;
    elf_symbol s = decode_symbol(*this, data->data() + i * ent, name_off);
    if (s.shndx == 0 || (type && s.type != *type) || !names.equals(name_off, name)) continue;
    s.name = std::string(name);
    return std::optional<elf_symbol>(std::move(s));
  }
  return std::optional<elf_symbol>();
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
  open_rules rules;
  rules.no_follow = false;
  rules.max_bytes = max_bytes;
  return read_guarded_file(path, rules);
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

}  // namespace jitunwind::toolkit
