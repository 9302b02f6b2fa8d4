#include "gdb_names.hpp"

#include "elf/elf_reader.hpp"
#include "gdbjit/gdbjit.hpp"

#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <vector>

namespace jitunwind_preload {

namespace {

namespace gdbjit = jitunwind::detail::gdbjit;

// Copies `size` bytes of this process at `address`; false if any of them is not mapped.
bool read_self(uint64_t address, void* out, size_t size) {
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(address), size};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

constexpr uint8_t stt_func = 2;
constexpr uint16_t shn_loreserve = 0xff00;

}  // namespace

bool gdb_names::find_descriptor() {
  if (descriptor_ != 0) return true;
  // The exported definition first (libLLVM's, a runtime linked with -rdynamic); this library's
  // own copy is hidden, so dlsym never returns it.
  if (void* d = dlsym(RTLD_DEFAULT, "__jit_debug_descriptor")) {
    descriptor_ = reinterpret_cast<uint64_t>(d);
    return true;
  }
  // A definition only in a symbol table on disk (an executable without -rdynamic): the same
  // search gdb does. It reads files, so only once.
  if (looked_up_) return false;
  looked_up_ = true;
  const gdbjit::descriptor_info d = gdbjit::inspect_descriptors();
  if (d.first != nullptr && d.first != d.ours) descriptor_ = reinterpret_cast<uint64_t>(d.first);
  return descriptor_ != 0;
}

bool gdb_names::refresh() {
  if (!find_descriptor()) return false;
  gdbjit::jit_descriptor desc{};
  if (!read_self(descriptor_, &desc, sizeof desc) || desc.version != 1) return false;
  std::set<std::pair<uint64_t, uint64_t>> listed;
  uint64_t at = reinterpret_cast<uint64_t>(desc.first_entry);
  for (size_t n = 0; at != 0 && n < max_entries; ++n) {
    gdbjit::jit_code_entry e{};
    if (!read_self(at, &e, sizeof e)) break;  // unlinked and freed meanwhile: read the rest later
    const auto object = std::make_pair(reinterpret_cast<uint64_t>(e.symfile_addr), e.symfile_size);
    if (listed.insert(object).second && !seen_.contains(object))
      read_object(object.first, object.second);
    at = reinterpret_cast<uint64_t>(e.next_entry);
  }
  seen_ = std::move(listed);
  return true;
}

void gdb_names::read_object(uint64_t address, uint64_t size) {
  if (size == 0 || size > max_object) return;
  std::vector<uint8_t> bytes(size);
  if (!read_self(address, bytes.data(), bytes.size())) return;
  auto image = jitunwind::detail::elf_image::parse(bytes);
  if (!image) return;
  const auto* symtab = image->first_section_of_type(jitunwind::detail::elf_sht_symtab);
  if (symtab == nullptr) return;
  auto symbols = image->symbols(*symtab);
  if (!symbols) return;
  const auto& sections = image->sections();
  for (const jitunwind::detail::elf_symbol& s : *symbols) {
    if (s.type != stt_func || s.name.empty() || s.shndx == 0) continue;
    uint64_t start = s.value;
    // A relocatable object (LLVM's debug objects) gives values relative to their section, whose
    // address the JIT set to where the section was loaded.
    if (image->type() == jitunwind::detail::elf_et_rel) {
      if (s.shndx >= shn_loreserve || s.shndx >= sections.size()) continue;
      start += sections[s.shndx].addr;
    }
    if (names_.size() >= max_names && !names_.contains(start)) return;
    names_[start] = s.name;
  }
}

const std::string* gdb_names::find(uint64_t start) const {
  auto it = names_.find(start);
  return it == names_.end() ? nullptr : &it->second;
}

void gdb_names::forget(uint64_t begin, uint64_t end) {
  names_.erase(names_.lower_bound(begin), names_.lower_bound(end));
}

}  // namespace jitunwind_preload
