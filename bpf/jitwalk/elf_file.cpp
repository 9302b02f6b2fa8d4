#include "jitwalk/elf_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace jitwalk {

using jitunwind::toolkit::elf_image;
using jitunwind::toolkit::elf_section;

result<std::shared_ptr<elf_file>> elf_file::open(const std::string& path,
                                                 const elf_file_limits& limits) {
  jitunwind::toolkit::open_rules rules;
  rules.what = "ELF object";
  rules.no_follow = limits.target_path;
  if (limits.target_path) rules.root_fd = limits.root_fd;
  rules.max_bytes = UINT64_MAX;  // read section by section, each at most limits.max_read
  auto file = jitunwind::toolkit::guarded_file::open(path, rules);
  if (!file) return file.error();
  if (file->size() < 16)
    return make_error(errc::malformed, "%s: %llu bytes, too short for ELF", path.c_str(),
                      static_cast<unsigned long long>(file->size()));
  jitunwind::toolkit::elf_read_limits el;
  el.budget = limits.budget;
  el.max_read = limits.max_read;
  auto img = elf_image::open(std::move(*file), el);
  if (!img) return img.error();
  std::shared_ptr<elf_file> f(new elf_file());
  f->path_ = path;
  f->limits_ = limits;
  f->image_.emplace(std::move(img.value()));
  return f;
}

result<std::shared_ptr<elf_file>> elf_file::from_bytes(std::span<const uint8_t> bytes,
                                                       const std::string& name) {
  auto img = elf_image::parse(bytes);
  if (!img)
    return make_error(img.error().code(), "%s: %s", name.c_str(), img.error().message().c_str());
  std::shared_ptr<elf_file> f(new elf_file());
  f->path_ = name;
  f->image_.emplace(std::move(img.value()));
  return f;
}

jitunwind::toolkit::elf_data elf_file::section(const char* name, uint64_t* vaddr) const {
  const elf_section* s = image_->find_section(name);
  if (s == nullptr) return {};
  auto data = image_->section_data(*s);
  if (!data) return {};
  if (vaddr != nullptr) *vaddr = s->addr;
  return std::move(data).value();
}

void elf_file::load_symbols_from(const elf_image& img, bool want_symtab) const {
  // An object has one table of each kind: only the first is read (a file with thousands of
  // symbol table headers over one table costs one table, not thousands).
  const elf_section* s = img.first_section_of_type(want_symtab ? jitunwind::toolkit::elf_sht_symtab
                                                               : jitunwind::toolkit::elf_sht_dynsym);
  if (s == nullptr) return;
  auto syms = img.symbols(*s);
  if (!syms) {
    if (jitunwind::toolkit::is_limit(syms.error()))
      warn_cut(s->name + " of " + name() + " (function names)", syms.error());
    else
      warn("%s (no names from %s)", syms.error().message().c_str(), name().c_str());
    return;
  }
  symbols_.reserve(symbols_.size() + syms->size());
  for (auto& sym : syms.value()) {
    // STT_FUNC = 2, STT_GNU_IFUNC = 10; defined (shndx != 0).
    if ((sym.type != 2 && sym.type != 10) || sym.shndx == 0 || sym.value == 0) continue;
    if (sym.name.empty()) continue;
    // "memcpy@@GLIBC_2.14" -> "memcpy": versions are noise in a profile.
    if (size_t at = sym.name.find('@'); at != std::string::npos && at > 0) sym.name.resize(at);
    function_symbol f{sym.value, sym.size, std::move(sym.name), 0, sym.bind};
    // A symbol without a size covers at most the rest of its section (glibc's size-0 _init in
    // .init must not name the .plt after it).
    if (sym.shndx < img.sections().size()) {
      const elf_section& in = img.sections()[sym.shndx];
      if (in.addr <= sym.value && sym.value - in.addr < in.size) f.limit = in.addr + in.size;
    }
    if (!keep_symbol(std::move(f))) return;
  }
}

bool elf_file::keep_symbol(function_symbol&& f) const {
  // Kept for the whole run: charged to the budget; what does not fit goes unnamed.
  if (auto r = symbols_charge_.grow(limits_.budget, sizeof(function_symbol) + f.name.size(),
                                    "symbols of " + name());
      !r) {
    warn("%s; the other functions of %s stay unnamed", r.error().message().c_str(), name().c_str());
    return false;
  }
  symbols_.push_back(std::move(f));
  return true;
}

void elf_file::load_plt_symbols() const {
  // x86-64 lazy-binding layout (what ld writes and perf reads): the i-th .rela.plt relocation
  // owns the i-th 16-byte entry of .plt.sec when there is one (IBT), else the (i+1)-th of .plt
  // (entry 0 is the resolver's). IRELATIVE entries have a slot but no symbol: left unnamed.
  constexpr uint64_t entry = 16;
  constexpr uint32_t r_x86_64_jump_slot = 7;
  if (image_->machine() != jitunwind::toolkit::elf_em_x86_64) return;
  const elf_section* rela = image_->find_section(".rela.plt");
  const elf_section* sec = image_->find_section(".plt.sec");
  const elf_section* plt = sec ? sec : image_->find_section(".plt");
  if (rela == nullptr || plt == nullptr || rela->link >= image_->sections().size()) return;
  auto relocs = image_->relocations(*rela);
  if (!relocs) return;
  auto dynsyms = image_->symbols(image_->sections()[rela->link]);
  if (!dynsyms) return;
  const uint64_t first = sec ? 0 : 1;
  const uint64_t slots = plt->size / entry;
  for (size_t i = 0; i < relocs->size() && first + i < slots; ++i) {
    const auto& r = (*relocs)[i];
    if (r.type != r_x86_64_jump_slot || r.symbol == 0 || r.symbol >= dynsyms->size()) continue;
    std::string sym = (*dynsyms)[r.symbol].name;
    if (size_t at = sym.find('@'); at != std::string::npos) sym.resize(at);
    if (sym.empty()) continue;
    const uint64_t at = plt->addr + (first + i) * entry;
    if (!keep_symbol({at, entry, sym + "@plt", 0, 1})) return;
  }
}

const std::vector<function_symbol>& elf_file::symbols() const {
  if (symbols_loaded_) return symbols_;
  symbols_loaded_ = true;
  const bool has_symtab = image_->find_section(".symtab") != nullptr;
  if (has_symtab) {
    load_symbols_from(*image_, true);
  } else {
    std::string id = build_id();
    if (id.size() > 2) {
      std::string dbg =
          "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
      if (access(dbg.c_str(), R_OK) == 0) {
        elf_file_limits dl = limits_;
        dl.target_path = false;  // a system directory
        dl.name.clear();
        if (auto d = open(dbg, dl); d) {
          debug_file_ = d.value();
          load_symbols_from(debug_file_->image(), true);
        }
      }
    }
  }
  load_symbols_from(*image_, false);  // .dynsym adds exported aliases and fills gaps
  load_plt_symbols();
  std::sort(symbols_.begin(), symbols_.end(),
            [](const function_symbol& a, const function_symbol& b) {
              if (a.start != b.start) return a.start < b.start;
              if (a.size != b.size) return a.size > b.size;
              return a.bind == 1 && b.bind != 1;  // global before weak (vDSO aliases)
            });
  // One symbol per address: prefer the first (largest size; .symtab before .dynsym).
  std::vector<function_symbol> unique;
  unique.reserve(symbols_.size());
  for (auto& s : symbols_) {
    if (!unique.empty() && unique.back().start == s.start) continue;
    unique.push_back(std::move(s));
  }
  symbols_ = std::move(unique);
  return symbols_;
}

const function_symbol* elf_file::find_symbol(uint64_t vaddr) const {
  const auto& syms = symbols();
  auto it = std::upper_bound(syms.begin(), syms.end(), vaddr,
                             [](uint64_t v, const function_symbol& s) { return v < s.start; });
  if (it == syms.begin()) return nullptr;
  const function_symbol& s = *(it - 1);
  if (s.size != 0 && vaddr >= s.start + s.size) return nullptr;
  if (s.size == 0 && it != syms.end() && vaddr >= it->start) return nullptr;
  if (s.size == 0 && s.limit != 0 && vaddr >= s.limit) return nullptr;
  return &s;
}

std::vector<sdt_probe> elf_file::sdt_probes() const {
  std::vector<sdt_probe> out;
  const elf_section* s = image_->find_section(".note.stapsdt");
  if (s == nullptr) return out;
  auto data = image_->section_data(*s);
  if (!data) return out;
  std::span<const uint8_t> d = data->span();
  size_t pos = 0;
  auto u32 = [&](size_t at) { return static_cast<uint32_t>(image_->read_uint(d.data() + at, 4)); };
  auto align4 = [](size_t v) { return (v + 3) & ~size_t{3}; };
  while (pos + 12 <= d.size()) {
    uint32_t namesz = u32(pos), descsz = u32(pos + 4), type = u32(pos + 8);
    size_t name_at = pos + 12;
    size_t desc_at = name_at + align4(namesz);
    size_t next = desc_at + align4(descsz);
    if (namesz > d.size() || descsz > d.size() || next > d.size() || desc_at > d.size()) break;
    const bool is_sdt =
        type == 3 && namesz == 8 && std::memcmp(d.data() + name_at, "stapsdt", 8) == 0;
    if (is_sdt && descsz >= 24) {
      sdt_probe p;
      p.pc = image_->read_uint(d.data() + desc_at, 8);
      p.semaphore = image_->read_uint(d.data() + desc_at + 16, 8);
      const char* str = reinterpret_cast<const char*>(d.data() + desc_at + 24);
      size_t left = descsz - 24;
      std::string fields[3];
      for (auto& f : fields) {
        const void* nul = std::memchr(str, 0, left);
        if (nul == nullptr) {
          left = 0;
          break;
        }
        size_t n = static_cast<size_t>(static_cast<const char*>(nul) - str);
        f.assign(str, n);
        str += n + 1;
        left -= n + 1;
      }
      p.provider = fields[0];
      p.name = fields[1];
      p.args = fields[2];
      if (!p.provider.empty() && !p.name.empty()) out.push_back(std::move(p));
    }
    pos = next;
  }
  return out;
}

std::string elf_file::build_id() const {
  if (build_id_loaded_) return build_id_;
  build_id_loaded_ = true;
  build_id_ = compute_build_id();
  return build_id_;
}

std::string elf_file::compute_build_id() const {
  // Note sections of a real object do not overlap: reading more than the file holds means they
  // do (the same bytes claimed by thousands of headers), and the search stops.
  uint64_t read = 0;
  for (const elf_section& s : image_->sections()) {
    if (s.type != 7 /* SHT_NOTE */) continue;
    if (s.size > image_->file_size() - std::min(read, image_->file_size())) break;
    read += s.size;
    auto data = image_->section_data(s);
    if (!data) continue;
    std::span<const uint8_t> d = data->span();
    size_t pos = 0;
    while (pos + 12 <= d.size()) {
      uint32_t namesz = static_cast<uint32_t>(image_->read_uint(d.data() + pos, 4));
      uint32_t descsz = static_cast<uint32_t>(image_->read_uint(d.data() + pos + 4, 4));
      uint32_t type = static_cast<uint32_t>(image_->read_uint(d.data() + pos + 8, 4));
      size_t name_at = pos + 12;
      size_t desc_at = name_at + ((namesz + 3u) & ~3u);
      size_t next = desc_at + ((descsz + 3u) & ~3u);
      if (namesz > d.size() || descsz > d.size() || next > d.size()) break;
      if (type == 3 /* NT_GNU_BUILD_ID */ && namesz == 4 &&
          std::memcmp(d.data() + name_at, "GNU", 4) == 0) {
        std::string hexid;
        for (size_t i = 0; i < descsz; ++i) hexid += format("%02x", d[desc_at + i]);
        return hexid;
      }
      pos = next;
    }
  }
  return {};
}

std::string elf_file::interpreter() const {
  const auto* seg = image_->find_segment(3 /* PT_INTERP */);
  if (seg == nullptr) return {};
  auto data = image_->segment_data(*seg);
  if (!data || data->empty()) return {};
  const char* p = reinterpret_cast<const char*>(data->data());
  return std::string(p, strnlen(p, data->size()));
}

std::optional<uint64_t> elf_file::offset_to_vaddr(uint64_t off) const noexcept {
  for (const auto& p : image_->segments()) {
    if (p.type != jitunwind::toolkit::elf_pt_load) continue;
    if (off >= p.offset && off - p.offset < p.filesz) return p.vaddr + (off - p.offset);
  }
  return std::nullopt;
}

std::optional<uint64_t> elf_file::load_bias(uint64_t map_start,
                                            uint64_t map_offset) const noexcept {
  // The loader maps page_down(p.offset) at page_down(bias + p.vaddr), so for the segment whose
  // file range starts in this mapping's first page: bias = start - offset + p.offset - p.vaddr.
  for (const auto& p : image_->segments()) {
    if (p.type != jitunwind::toolkit::elf_pt_load) continue;
    uint64_t page_off = p.offset & ~uint64_t{0xfff};
    if (page_off == map_offset || (map_offset >= p.offset && map_offset - p.offset < p.filesz)) {
      return map_start - map_offset + p.offset - p.vaddr;
    }
  }
  return std::nullopt;
}

}  // namespace jitwalk
