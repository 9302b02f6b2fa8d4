#include "usdt/elf_object.hpp"

#include "common/error.hpp"

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace jitunwind::usdt::detail {

namespace {

constexpr uint64_t page = 0x1000;

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) & ~(a - 1);
}

// The SysV ELF hash (DT_HASH), which glibc's dlsym uses when there is no DT_GNU_HASH.
uint32_t elf_hash_of(const char* name) {
  uint32_t h = 0;
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(name); *p != 0; ++p) {
    h = (h << 4) + *p;
    const uint32_t g = h & 0xf0000000u;
    if (g != 0) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

// A string table built incrementally; offset 0 is the empty string.
struct strtab {
  std::string bytes{'\0'};
  uint32_t add(const std::string& s) {
    const auto off = static_cast<uint32_t>(bytes.size());
    bytes += s;
    bytes += '\0';
    return off;
  }
};

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void pad4(std::vector<uint8_t>& out) {
  while (out.size() % 4 != 0) out.push_back(0);
}

void put_note(std::vector<uint8_t>& out, const char* owner, uint32_t type,
              const std::vector<uint8_t>& desc) {
  const auto namesz = static_cast<uint32_t>(std::strlen(owner) + 1);
  put_u32(out, namesz);
  put_u32(out, static_cast<uint32_t>(desc.size()));
  put_u32(out, type);
  out.insert(out.end(), owner, owner + namesz);
  pad4(out);
  out.insert(out.end(), desc.begin(), desc.end());
  pad4(out);
}

// 20 bytes identifying the object's content (provider, probes, arguments): identical objects
// get identical build ids, as a linker's would. perf's build-id cache needs one.
std::vector<uint8_t> build_id_of(const object_spec& spec) {
  std::string text = spec.provider + '\n' + spec.soname + '\n';
  for (const auto& p : spec.probes) text += p.name + '(' + p.args + ")\n";
  std::vector<uint8_t> id;
  for (uint64_t lane = 0; lane < 3; ++lane) {
    uint64_t h = 0xcbf29ce484222325ull ^ (lane * 0x9e3779b97f4a7c15ull);
    for (unsigned char c : text) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    for (int i = 0; i < 8 && id.size() < 20; ++i) id.push_back(static_cast<uint8_t>(h >> (8 * i)));
  }
  return id;
}

struct elf_closer {
  void operator()(Elf* e) const { elf_end(e); }
};

error libelf_error(const char* what) {
  return jitunwind::detail::make_error(errc::malformed, "usdt: libelf: %s: %s", what,
                                       elf_errmsg(-1));
}

struct section_plan {
  const char* name;
  uint32_t type;
  uint64_t flags;
  uint64_t addr;  // 0 for non-alloc
  uint64_t offset;
  uint64_t align;
  uint64_t entsize;
  uint32_t link;
  uint32_t info;
  const void* data;
  uint64_t size;
};

}  // namespace

std::string stub_symbol(const std::string& provider, const std::string& probe) {
  return provider + "__" + probe;
}

std::string semaphore_symbol(const std::string& provider, const std::string& probe) {
  return provider + "_" + probe + "_semaphore";
}

result<object_layout> write_object(int fd, const object_spec& spec) {
  const size_t n = spec.probes.size();
  object_layout layout;

  // ---- contents that do not depend on addresses
  strtab dynstr;
  const uint32_t soname_off = dynstr.add(spec.soname);
  std::vector<uint32_t> stub_name(n), sema_name(n);
  for (size_t i = 0; i < n; ++i) {
    stub_name[i] = dynstr.add(stub_symbol(spec.provider, spec.probes[i].name));
    sema_name[i] = dynstr.add(semaphore_symbol(spec.provider, spec.probes[i].name));
  }
  const size_t nsyms = 1 + 2 * n;

  std::vector<uint8_t> build_id_note;
  put_note(build_id_note, "GNU", NT_GNU_BUILD_ID, build_id_of(spec));

  // .hash: nbucket, nchain, buckets, chains.
  const auto nbucket = static_cast<uint32_t>(nsyms / 2 + 1);
  std::vector<uint32_t> hash(2 + nbucket + nsyms, 0);
  hash[0] = nbucket;
  hash[1] = static_cast<uint32_t>(nsyms);
  for (size_t s = 1; s < nsyms; ++s) {
    const char* name =
        dynstr.bytes.c_str() + (s % 2 == 1 ? stub_name[(s - 1) / 2] : sema_name[(s - 1) / 2]);
    const uint32_t b = elf_hash_of(name) % nbucket;
    // Prepend s to bucket b's chain.
    hash[2 + nbucket + s] = hash[2 + b];
    hash[2 + b] = static_cast<uint32_t>(s);
  }

  std::vector<uint8_t> text(n * stub_size, 0xcc);  // int3 between stubs
  for (size_t i = 0; i < n; ++i) {
    text[i * stub_size] = 0x90;      // nop: the probe site
    text[i * stub_size + 1] = 0xc3;  // ret
  }

  // ---- layout
  const uint16_t nphdr = 6;
  uint64_t off = sizeof(Elf64_Ehdr) + nphdr * sizeof(Elf64_Phdr);
  const uint64_t build_id_off = align_up(off, 4);
  off = build_id_off + build_id_note.size();
  const uint64_t hash_off = align_up(off, 8);
  off = hash_off + hash.size() * 4;
  const uint64_t dynsym_off = align_up(off, 8);
  off = dynsym_off + nsyms * sizeof(Elf64_Sym);
  const uint64_t dynstr_off = off;
  off += dynstr.bytes.size();
  const uint64_t base_off = off;
  off += 1;
  const uint64_t r_end = off;

  const uint64_t text_off = align_up(r_end, page);
  const uint64_t text_end = text_off + text.size();

  // .probes first in the RW segment: its address is the one the SDK keeps stable.
  uint32_t slots = spec.semaphore_slots;
  for (const auto& p : spec.probes) slots = std::max(slots, p.semaphore_index + 1);
  const uint64_t probes_off = align_up(text_end, page);
  const uint64_t dynamic_off = align_up(probes_off + 2 * uint64_t{slots}, 8);
  const size_t ndyn = 7;
  const uint64_t rw_end = dynamic_off + ndyn * sizeof(Elf64_Dyn);

  layout.text = text_off;
  layout.stapsdt_base = base_off;
  layout.probes_section = probes_off;
  for (size_t i = 0; i < n; ++i) {
    layout.stub.push_back(text_off + i * stub_size);
    layout.semaphore.push_back(probes_off + 2 * uint64_t{spec.probes[i].semaphore_index});
  }
  layout.segments = {{0, r_end, false, false},
                     {text_off, text_end, false, true},
                     {probes_off, rw_end, true, false}};

  // ---- contents that depend on addresses
  std::vector<Elf64_Sym> dynsym(nsyms);
  std::memset(dynsym.data(), 0, dynsym.size() * sizeof(Elf64_Sym));
  // Section indexes (see `plan` below).
  const uint16_t text_index = 6, dynstr_index = 4, dynsym_index = 3, probes_index = 7;
  for (size_t i = 0; i < n; ++i) {
    Elf64_Sym& f = dynsym[1 + 2 * i];
    f.st_name = stub_name[i];
    f.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    f.st_shndx = text_index;
    f.st_value = layout.stub[i];
    f.st_size = 2;  // nop; ret
    Elf64_Sym& s = dynsym[2 + 2 * i];
    s.st_name = sema_name[i];
    s.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
    s.st_shndx = probes_index;
    s.st_value = layout.semaphore[i];
    s.st_size = 2;
  }

  const Elf64_Dyn dynamic[ndyn] = {
      {DT_SONAME, {soname_off}},
      {DT_HASH, {hash_off}},
      {DT_STRTAB, {dynstr_off}},
      {DT_SYMTAB, {dynsym_off}},
      {DT_STRSZ, {dynstr.bytes.size()}},
      {DT_SYMENT, {sizeof(Elf64_Sym)}},
      {DT_NULL, {0}},
  };
  std::vector<uint8_t> semaphores(2 * size_t{slots}, 0);
  const uint8_t base_byte = 0;

  std::vector<uint8_t> sdt_notes;
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint8_t> desc;
    put_u64(desc, layout.stub[i]);
    put_u64(desc, base_off);
    put_u64(desc, layout.semaphore[i]);
    for (const std::string* s : {&spec.provider, &spec.probes[i].name, &spec.probes[i].args}) {
      desc.insert(desc.end(), s->begin(), s->end());
      desc.push_back(0);
    }
    put_note(sdt_notes, "stapsdt", 3, desc);
  }

  const uint64_t sdt_off = align_up(rw_end, 4);
  const uint64_t shstr_off = sdt_off + sdt_notes.size();

  strtab shstr;
  section_plan plan[] = {
      {".note.gnu.build-id", SHT_NOTE, SHF_ALLOC, build_id_off, build_id_off, 4, 0, 0, 0,
       build_id_note.data(), build_id_note.size()},
      {".hash", SHT_HASH, SHF_ALLOC, hash_off, hash_off, 8, 4, dynsym_index, 0, hash.data(),
       hash.size() * 4},
      {".dynsym", SHT_DYNSYM, SHF_ALLOC, dynsym_off, dynsym_off, 8, sizeof(Elf64_Sym), dynstr_index,
       1, dynsym.data(), dynsym.size() * sizeof(Elf64_Sym)},
      {".dynstr", SHT_STRTAB, SHF_ALLOC, dynstr_off, dynstr_off, 1, 0, 0, 0, dynstr.bytes.data(),
       dynstr.bytes.size()},
      {".stapsdt.base", SHT_PROGBITS, SHF_ALLOC, base_off, base_off, 1, 0, 0, 0, &base_byte, 1},
      {".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, text_off, text_off, 16, 0, 0, 0,
       text.data(), text.size()},
      {".probes", SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, probes_off, probes_off, 2, 0, 0, 0,
       semaphores.data(), semaphores.size()},
      {".dynamic", SHT_DYNAMIC, SHF_ALLOC | SHF_WRITE, dynamic_off, dynamic_off, 8,
       sizeof(Elf64_Dyn), dynstr_index, 0, dynamic, sizeof dynamic},
      {".note.stapsdt", SHT_NOTE, 0, 0, sdt_off, 4, 0, 0, 0, sdt_notes.data(), sdt_notes.size()},
      {".shstrtab", SHT_STRTAB, 0, 0, 0, 1, 0, 0, 0, nullptr, 0},
  };
  constexpr size_t nsec = sizeof plan / sizeof plan[0];
  uint32_t sh_name[nsec];
  for (size_t i = 0; i < nsec; ++i) sh_name[i] = shstr.add(plan[i].name);
  plan[nsec - 1].offset = shstr_off;
  plan[nsec - 1].data = shstr.bytes.data();
  plan[nsec - 1].size = shstr.bytes.size();
  const uint64_t shdr_off = align_up(shstr_off + shstr.bytes.size(), 8);
  layout.file_size = shdr_off + (nsec + 1) * sizeof(Elf64_Shdr);

  // ---- write with libelf
  if (elf_version(EV_CURRENT) == EV_NONE) return libelf_error("elf_version");
  std::unique_ptr<Elf, elf_closer> elf(elf_begin(fd, ELF_C_WRITE, nullptr));
  if (!elf) return libelf_error("elf_begin");
  elf_flagelf(elf.get(), ELF_C_SET, ELF_F_LAYOUT);

  Elf64_Ehdr* eh = elf64_newehdr(elf.get());
  if (eh == nullptr) return libelf_error("elf64_newehdr");
  eh->e_ident[EI_DATA] = ELFDATA2LSB;
  eh->e_ident[EI_OSABI] = ELFOSABI_SYSV;
  eh->e_type = ET_DYN;
  eh->e_machine = EM_X86_64;
  eh->e_version = EV_CURRENT;
  eh->e_phoff = sizeof(Elf64_Ehdr);
  eh->e_shoff = shdr_off;
  eh->e_shstrndx = static_cast<uint16_t>(nsec);  // section 0 is SHN_UNDEF

  Elf64_Phdr* ph = elf64_newphdr(elf.get(), nphdr);
  if (ph == nullptr) return libelf_error("elf64_newphdr");
  auto load = [](Elf64_Phdr& p, uint64_t start, uint64_t end, uint32_t flags) {
    p.p_type = PT_LOAD;
    p.p_flags = flags;
    p.p_offset = p.p_vaddr = p.p_paddr = start;
    p.p_filesz = p.p_memsz = end - start;
    p.p_align = page;
  };
  load(ph[0], 0, r_end, PF_R);
  load(ph[1], text_off, text_end, PF_R | PF_X);
  load(ph[2], probes_off, rw_end, PF_R | PF_W);
  ph[3] = {PT_DYNAMIC,  PF_R | PF_W,    dynamic_off,    dynamic_off,
           dynamic_off, sizeof dynamic, sizeof dynamic, 8};
  ph[4] = {PT_NOTE,
           PF_R,
           build_id_off,
           build_id_off,
           build_id_off,
           build_id_note.size(),
           build_id_note.size(),
           4};
  ph[5] = {PT_GNU_STACK, PF_R | PF_W, 0, 0, 0, 0, 0, 16};

  for (size_t i = 0; i < nsec; ++i) {
    Elf_Scn* scn = elf_newscn(elf.get());
    if (scn == nullptr) return libelf_error("elf_newscn");
    Elf_Data* d = elf_newdata(scn);
    if (d == nullptr) return libelf_error("elf_newdata");
    d->d_buf = const_cast<void*>(plan[i].data);
    d->d_size = plan[i].size;
    d->d_off = 0;
    d->d_align = plan[i].align;
    d->d_type = ELF_T_BYTE;  // everything is laid out in target byte order already
    d->d_version = EV_CURRENT;
    Elf64_Shdr* sh = elf64_getshdr(scn);
    if (sh == nullptr) return libelf_error("elf64_getshdr");
    sh->sh_name = sh_name[i];
    sh->sh_type = plan[i].type;
    sh->sh_flags = plan[i].flags;
    sh->sh_addr = plan[i].addr;
    sh->sh_offset = plan[i].offset;
    sh->sh_size = plan[i].size;
    sh->sh_link = plan[i].link;
    sh->sh_info = plan[i].info;
    sh->sh_addralign = plan[i].align;
    sh->sh_entsize = plan[i].entsize;
  }
  if (elf_update(elf.get(), ELF_C_WRITE) < 0) return libelf_error("elf_update");
  return layout;
}

}  // namespace jitunwind::usdt::detail
