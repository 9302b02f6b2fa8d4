#include "gdb_names.hpp"

#include <jitunwind/toolkit/elf_reader.hpp>
#include <jitunwind/toolkit/gdb_jit.hpp>

#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <vector>

namespace jitunwind_preload {

namespace {

namespace gdbjit = jitunwind::toolkit::gdb_jit;

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
  } else if (!looked_up_) {
    // A definition only in a symbol table on disk (an executable without -rdynamic): the same
    // search gdb does. It reads files, so only once.
    looked_up_ = true;
    const auto first = gdbjit::first_jit_symbols_in_load_order();
    if (first && first->descriptor != reinterpret_cast<uintptr_t>(gdbjit::own_descriptor()))
      descriptor_ = first->descriptor;
  }
  if (descriptor_ == 0) return false;
  // The descriptor is a global of the object defining it: once that object cannot be unloaded
  // (dlopen with RTLD_NODELETE pins it), the descriptor itself may be read directly, which saves
  // a system call per registration (most of the time the list is empty). Else every read goes
  // through process_vm_readv.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(descriptor_), &info) != 0 && info.dli_fname != nullptr) {
    pinned_ = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE) != nullptr;
  }
  return true;
}

bool gdb_names::read_descriptor(gdbjit::jit_descriptor& out) const {
  if (!pinned_) return read_self(descriptor_, &out, sizeof out);
  // Another thread of the host may be updating it (under its own lock, not ours): a torn read
  // gives at worst a stale or not-yet-linked entry pointer, which the checked reads below
  // handle.
  const auto* d = reinterpret_cast<const volatile gdbjit::jit_descriptor*>(descriptor_);
  out.version = d->version;
  out.action_flag = d->action_flag;
  out.relevant_entry = d->relevant_entry;
  out.first_entry = d->first_entry;
  return true;
}

bool gdb_names::refresh() {
  if (!find_descriptor()) return false;
  gdbjit::jit_descriptor desc{};
  if (!read_descriptor(desc) || desc.version != 1) return false;
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
  auto image = jitunwind::toolkit::elf_image::parse(bytes);
  if (!image) return;
  const auto* symtab = image->first_section_of_type(jitunwind::toolkit::elf_sht_symtab);
  if (symtab == nullptr) return;
  auto symbols = image->symbols(*symtab);
  if (!symbols) return;
  const auto& sections = image->sections();
  for (const jitunwind::toolkit::elf_symbol& s : *symbols) {
    if (s.type != stt_func || s.name.empty() || s.shndx == 0) continue;
    uint64_t start = s.value;
    // A relocatable object (LLVM's debug objects) gives values relative to their section, whose
    // address the JIT set to where the section was loaded.
    if (image->type() == jitunwind::toolkit::elf_et_rel) {
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
  // The runtime may free that code's debug object and list the next one at the same address
  // with the same size (LLVM's allocator does, after ResourceTracker::remove): an object is
  // known by its address and size, so every listed one is read again at the next refresh.
  seen_.clear();
}

}  // namespace jitunwind_preload
