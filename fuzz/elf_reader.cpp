// libFuzzer target for the ELF reader as the tools use it on objects a profiled process maps
// (sdk/src/elf/elf_reader.cpp): the remote reader's registry symbol lookup, jitwalk's object
// (symbols, SDT notes, build id, interpreter, unwind sections, address translation), every
// symbol and relocation table, and the same image read from a file with pread (what the tools
// do), which must give the same answers as the image in memory. Seeds: fuzz/corpus/elf_reader/,
// the hostile shapes of tests/hostile (shared section names, thousands of symbol tables, an
// object cut short). A crash, a sanitizer report, a 10 s input (super-linear work) or 2 GB
// (amplification) fails stage 30.
#include <jitunwind/toolkit/elf_reader.hpp>
#include <jitunwind/toolkit/guarded_file.hpp>
#include "jitwalk/elf_file.hpp"
#include "remote/elf_symbols.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

using namespace jitunwind;
using jitunwind::toolkit::elf_image;

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "elf_reader fuzz: %s\n", what);
    std::abort();
  }
}

// The bytes as a file the reader opens by path, as it opens a target's object.
result<elf_image> from_file(const uint8_t* data, size_t size, int& fd) {
  fd = ::memfd_create("elf-fuzz", MFD_CLOEXEC);
  if (fd < 0 || ::write(fd, data, size) != static_cast<ssize_t>(size))
    return error(errc::io_error, "memfd");
  toolkit::open_rules rules;
  rules.no_follow = false;
  rules.max_bytes = UINT64_MAX;
  auto f = toolkit::guarded_file::open("/proc/self/fd/" + std::to_string(fd), rules);
  if (!f) return f.error();
  return elf_image::open(std::move(*f));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  (void)remote::detail::find_elf_symbol(bytes, "jitunwind_registry", "fuzz");

  auto mem = elf_image::parse(bytes);
  int fd = -1;
  auto file = from_file(data, size, fd);
  check(mem.ok() == file.ok(), "memory and file images disagree on validity");
  if (mem) {
    check(mem->sections().size() == file->sections().size(), "section counts differ");
    check(mem->segments().size() == file->segments().size(), "segment counts differ");
    // No more entries than the file can hold.
    check(mem->sections().size() <= size / 40 + 1, "more sections than bytes allow");
    for (size_t i = 0; i < mem->sections().size(); ++i) {
      const auto& s = mem->sections()[i];
      check(s.name == file->sections()[i].name, "section names differ");
      auto a = mem->section_data(s);
      auto b = file->section_data(file->sections()[i]);
      check(a.ok() == b.ok(), "section data validity differs");
      if (a)
        check(a->size() == b->size() && std::equal(a->begin(), a->end(), b->begin()),
              "section bytes differ");
      if (s.type == toolkit::elf_sht_symtab || s.type == toolkit::elf_sht_dynsym) {
        auto sa = mem->symbols(s);
        auto sb = file->symbols(file->sections()[i]);
        check(sa.ok() == sb.ok(), "symbol table validity differs");
        if (sa) check(sa->size() == sb->size(), "symbol counts differ");
        (void)mem->find_symbol(s, "main");
      }
      if (s.type == toolkit::elf_sht_rela || s.type == toolkit::elf_sht_rel)
        (void)mem->relocations(s);
    }
    for (const auto& p : mem->segments()) (void)mem->segment_data(p);
    (void)mem->first_load_vaddr();
  }
  if (fd >= 0) ::close(fd);

  auto obj = jitwalk::elf_file::from_bytes(bytes, "fuzz");
  if (obj) {
    const auto& o = **obj;
    for (const auto& s : o.symbols()) (void)o.find_symbol(s.start);
    (void)o.find_symbol(0x1000);
    (void)o.sdt_probes();
    (void)o.build_id();
    (void)o.interpreter();
    uint64_t vaddr = 0;
    (void)o.section(".sframe", &vaddr);
    (void)o.section(".eh_frame", &vaddr);
    (void)o.offset_to_vaddr(0x1000);
    (void)o.load_bias(0x7f0000000000, 0);
  }
  return 0;
}
