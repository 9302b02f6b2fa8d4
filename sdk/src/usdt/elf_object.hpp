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
//   RW  [page, …)     .probes (u16 semaphores, indexed by the probe's stable semaphore index),
//                     .dynamic
//
// The SDK maps the object itself (usdt/object_area.hpp) so that `.probes` always lands on the
// same address; the object stays a well-formed shared library for every other reader.
//   --                .note.stapsdt, .shstrtab, section headers (not loaded)
#pragma once

#include <jitunwind/result.h>

#include <cstdint>
#include <string>
#include <vector>

namespace jitunwind::usdt::detail {

struct object_probe {
  std::string name;
  std::string args;              // the note's argument string
  uint32_t semaphore_index = 0;  // its u16 in .probes; distinct per probe
};

struct object_spec {
  std::string provider;
  std::string soname;
  std::vector<object_probe> probes;
  /// Number of u16 semaphores in .probes (> every probe's semaphore_index); indexes no probe
  /// uses stay zero.
  uint32_t semaphore_slots = 0;
};

/// A PT_LOAD segment: [start, end) is both the link-time address range and the file range.
struct object_segment {
  uint64_t start = 0;
  uint64_t end = 0;
  bool writable = false;
  bool executable = false;
};

/// Link-time addresses in the written object (== file offsets).
struct object_layout {
  std::vector<uint64_t> stub;       // probe sites
  std::vector<uint64_t> semaphore;  // u16 each
  uint64_t stapsdt_base = 0;
  uint64_t text = 0;
  uint64_t probes_section = 0;  // page-aligned: the start of the RW segment
  uint64_t file_size = 0;
  std::vector<object_segment> segments;  // the PT_LOADs, in address order
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
