// Generation of the dynamic USDT shared object with libelf.
//
// Layout (x86-64, 4 KiB pages). Every PT_LOAD has p_vaddr == p_offset, so a link-time address
// is also a file offset: libbpf (which applies the .stapsdt.base adjustment and converts
// addresses to file offsets through PT_LOAD segments) and bcc 0.26 / bpftrace 0.17 (which
// ignore the base and derive the semaphore's file offset from the .probes section header)
// compute the same uprobe offsets and reference-counter offsets.
//
//   R   [0, …)        ELF header, program headers, .note.gnu.build-id, .hash, .dynsym,
//                     .dynstr, .stapsdt.base
//   R X [page, …)     .text: one 16-byte stub per probe: nop (the probe site); ret; int3…
//   RW  [page, …)     .dynamic (ld.so relocates it in place), .probes (u16 semaphores)
//   --                .note.stapsdt, .shstrtab, section headers (not loaded)
#pragma once

#include <jitunwind/result.h>

#include <cstdint>
#include <string>
#include <vector>

namespace jitunwind::usdt::detail {

struct object_probe {
  std::string name;
  std::string args;  // the note's argument string
};

struct object_spec {
  std::string provider;
  std::string soname;
  std::vector<object_probe> probes;
};

/// Link-time addresses in the written object (== file offsets).
struct object_layout {
  std::vector<uint64_t> stub;       // probe sites
  std::vector<uint64_t> semaphore;  // u16 each
  uint64_t stapsdt_base = 0;
  uint64_t text = 0;
  uint64_t probes_section = 0;
  uint64_t file_size = 0;
};

inline constexpr uint64_t stub_size = 16;

/// Dynamic symbol names: "<provider>__<probe>" for the stub (so stack traces through a probe
/// site read well), "<provider>_<probe>_semaphore" for the semaphore (the sys/sdt.h name).
std::string stub_symbol(const std::string& provider, const std::string& probe);
std::string semaphore_symbol(const std::string& provider, const std::string& probe);

/// Writes the object to `fd` (at offset 0; the file must be empty and writable).
/// `malformed` if libelf fails, with its message.
result<object_layout> write_object(int fd, const object_spec& spec);

}  // namespace jitunwind::usdt::detail
