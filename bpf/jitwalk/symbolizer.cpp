#include "jitwalk/symbolizer.hpp"

#include "walker.h"

#include <cxxabi.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace jitwalk {

const char* to_string(frame_kind k) noexcept {
  switch (k) {
    case frame_kind::native:
      return "native";
    case frame_kind::jit:
      return "jit";
    case frame_kind::kernel:
      return "kernel";
    case frame_kind::unknown:
      return "unknown";
  }
  return "?";
}

const char* to_string(name_source s) noexcept {
  switch (s) {
    case name_source::none:
      return "unnamed";
    case name_source::registry:
      return "jitunwind registry";
    case name_source::jitdump:
      return "jitdump";
    case name_source::perf_map:
      return "perf map";
    case name_source::elf:
      return "ELF symbols";
  }
  return "?";
}

std::string demangle(const std::string& name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string s(out);
  std::free(out);
  return s;
}

symbolizer::symbolizer(pid_t pid, const symbolizer_limits& limits)
    : pid_(pid), limits_(limits), view_(pid) {
  // A process in another PID namespace names its files after its PID there; one in another
  // mount namespace keeps them in its own /tmp: both are looked up as it sees them, inside its
  // root (perf does the same for a perf map).
  perf_map_path_ = format("/tmp/perf-%d.map", view_.ns_pid());
  names_.set_root(view_.root_fd());
  // The perf map and jitdump must be the target's own files (perf asks the same of a perf
  // map): the owner of /proc/PID is the user the target runs as.
  std::optional<uid_t> owner;
  struct stat st {};
  if (::stat(format("/proc/%d", pid).c_str(), &st) == 0) owner = st.st_uid;
  names_.set_limits(limits.budget, limits.max_file_bytes, owner);
}

void symbolizer::refresh() {
  if (view_.refresh()) names_.set_root(view_.root_fd());
  if (auto m = read_maps(pid_); m && !m->empty()) {
    maps_ = std::move(m.value());
    std::sort(maps_.begin(), maps_.end(),
              [](const mapping& a, const mapping& b) { return a.start < b.start; });
    // A runtime that writes a jitdump keeps the file mapped (that is how perf finds it), named
    // after its PID as it knows it; the path is the one in its mount namespace.
    const std::string suffix = format("/jit-%d.dump", view_.ns_pid());
    for (const mapping& mp : maps_) {
      if (mp.path.size() > suffix.size() &&
          mp.path.compare(mp.path.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          std::find(jitdump_paths_.begin(), jitdump_paths_.end(), mp.path) ==
              jitdump_paths_.end()) {
        jitdump_paths_.push_back(mp.path);
      }
    }
  }
  names_.load_perf_map(perf_map_path_);
  for (const std::string& p : jitdump_paths_) {
    auto r = names_.load_jitdump(p);
    (void)r;  // a missing or foreign file only means fewer names
  }
}

const mapping* symbolizer::find_mapping(uint64_t pc) const {
  auto it = std::upper_bound(maps_.begin(), maps_.end(), pc,
                             [](uint64_t v, const mapping& m) { return v < m.start; });
  if (it == maps_.begin()) return nullptr;
  --it;
  return pc < it->end ? &*it : nullptr;
}

std::shared_ptr<elf_file> symbolizer::object_for(const mapping& m) {
  if (m.inode == 0) return nullptr;
  const auto key = std::make_pair(m.dev, m.inode);
  if (auto it = objects_.find(key); it != objects_.end()) return it->second;
  if (failed_.count(key)) return nullptr;
  // A file another process of the run mapped: the same inode is the same object (its fd is
  // held open, so the inode cannot be reused for another file meanwhile).
  if (limits_.objects) {
    if (auto it = limits_.objects->find(key); it != limits_.objects->end()) {
      objects_[key] = it->second;
      return it->second;
    }
  }
  elf_file_limits lim;
  lim.budget = limits_.budget;
  lim.max_read = limits_.max_file_bytes;
  lim.name = m.path;
  auto f = elf_file::open(map_files_path(pid_, m), lim);  // the kernel's link: followed
  if (!f && m.file_backed() && f.error().code() != errc::malformed &&
      f.error().code() != errc::limit_exceeded) {
    // The process may be gone; the file itself may still be there (not for memfds). That path
    // is the target's choice: a link there is not followed.
    std::string path = m.path;
    if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0) path.clear();
    lim.target_path = true;
    lim.root_fd = view_.root_fd();
    if (!path.empty()) f = elf_file::open(path, lim);
  }
  if (!f) {
    failed_[key] = true;
    // Not ELF at all (a data file mapped executable) is no news; anything else is.
    if (jitunwind::toolkit::is_limit(f.error()))
      warn_cut(m.path + " (its symbols and tables)", f.error());
    else if (f.error().message().find("no ELF magic") == std::string::npos)
      warn("%s (no symbols or tables from %s)", f.error().message().c_str(), m.path.c_str());
    return nullptr;
  }
  objects_[key] = f.value();
  if (limits_.objects) (*limits_.objects)[key] = f.value();
  return f.value();
}

std::shared_ptr<elf_file> symbolizer::vdso_for(const mapping& m) {
  if (vdso_tried_) return vdso_;
  vdso_tried_ = true;
  // The kernel's vDSO is an ELF image of a page or two: copied whole from the target (it is
  // mapped there from offset 0, so file offsets are offsets in the mapping) and parsed by the
  // hostile-safe reader like any object of the target.
  constexpr uint64_t max_vdso = 1 << 20;
  if (m.end <= m.start || m.end - m.start > max_vdso) return nullptr;
  std::vector<uint8_t> bytes(m.end - m.start);
  iovec local{bytes.data(), bytes.size()};
  iovec remote{reinterpret_cast<void*>(m.start), bytes.size()};
  if (::process_vm_readv(pid_, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(bytes.size())) {
    detail("[vdso] of pid %d: cannot read it (%s): its frames stay unnamed", pid_,
           std::strerror(errno));
    return nullptr;
  }
  vdso_bytes_ = std::move(bytes);
  auto f = elf_file::from_bytes(vdso_bytes_, "[vdso]");
  if (!f) {
    warn("%s (vDSO frames stay unnamed)", f.error().message().c_str());
    vdso_bytes_.clear();
    return nullptr;
  }
  vdso_ = f.value();
  return vdso_;
}

frame_desc symbolizer::user_frame(uint64_t pc, bool return_address, uint64_t before) {
  jit_when when;
  when.before = before;
  return user_frame(pc, return_address, when);
}

bool symbolizer::starts_function(uint64_t pc, const jit_when& when) {
  if (const jit_names::entry* e = names_.find(pc, when)) return e->start == pc;
  const mapping* m = find_mapping(pc);
  if (m == nullptr || m->inode == 0 || m->shared_anonymous()) return false;
  auto obj = object_for(*m);
  if (!obj) return false;
  auto vaddr = obj->offset_to_vaddr(pc - m->start + m->offset);
  const function_symbol* s = vaddr ? obj->find_symbol(*vaddr) : nullptr;
  return s != nullptr && s->start == *vaddr;
}

bool symbolizer::after_call(uint64_t pc) {
  uint8_t b[8];
  iovec local{b, sizeof b};
  iovec remote{reinterpret_cast<void*>(pc - sizeof b), sizeof b};
  // Unknown (the process is gone): a return address, as for every other frame.
  if (pc < sizeof b ||
      ::process_vm_readv(pid_, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof b))
    return true;
  return jw_ends_with_call(b) != 0;
}

frame_desc symbolizer::user_frame(uint64_t pc, bool return_address, const jit_when& when) {
  // A return address is looked up at PC - 1: the call may be its function's last instruction
  // (a call that does not return), so PC can be the next function's first byte. But an address
  // a runtime stored itself is not a return address: BEAM's continuation pointers point at the
  // first instruction to run (the outermost one at $erts_beamasm:normal_exit/0). So where PC is
  // a function's first byte, PC - 1 is used only if the bytes before PC end with a call.
  uint64_t at = pc;
  if (return_address && pc > 0) {
    at = pc - 1;
    if (starts_function(pc, when) && !after_call(pc)) at = pc;
  }
  frame_desc d;
  const mapping* m = find_mapping(at);
  if (m != nullptr) {
    d.module = m->path;
    d.module_base = m->start;
    d.module_limit = m->end;
    d.module_offset = m->offset;
  }
  if (const jit_names::entry* e = names_.find(at, when)) {
    d.name = e->name;
    d.kind = frame_kind::jit;
    d.source = e->from == jit_names::origin::event     ? name_source::registry
               : e->from == jit_names::origin::jitdump ? name_source::jitdump
                                                       : name_source::perf_map;
    d.has_symbol = true;
    if (m == nullptr || m->anonymous()) d.module = "[jit]";
    return d;
  }
  const bool vdso = m != nullptr && m->inode == 0 && m->path == "[vdso]";
  if (m != nullptr && (vdso || (m->inode != 0 && !m->shared_anonymous()))) {
    if (auto obj = vdso ? vdso_for(*m) : object_for(*m)) {
      d.build_id = obj->build_id();
      auto vaddr = obj->offset_to_vaddr(at - m->start + m->offset);
      if (vaddr) {
        if (const function_symbol* s = obj->find_symbol(*vaddr)) {
          d.name = demangle(s->name);
          d.kind = frame_kind::native;
          d.source = name_source::elf;
          d.has_symbol = true;
          return d;
        }
      }
      std::string base = m->path.substr(m->path.rfind('/') + 1);
      d.name = format("%s+0x%llx", base.c_str(),
                      static_cast<unsigned long long>(vaddr ? *vaddr : at - m->start + m->offset));
      d.kind = frame_kind::native;
      return d;
    }
  }
  d.name = format("[unknown 0x%llx]", static_cast<unsigned long long>(pc));
  d.kind = frame_kind::unknown;
  return d;
}

void symbolizer::load_kallsyms() {
  kallsyms_loaded_ = true;
  std::ifstream f("/proc/kallsyms");
  std::string line;
  while (std::getline(f, line)) {
    unsigned long long addr = 0;
    char type = 0;
    char name[256];
    if (std::sscanf(line.c_str(), "%llx %c %255s", &addr, &type, name) != 3) continue;
    if (addr == 0) continue;
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
    kallsyms_.emplace_back(addr, name);
  }
  std::sort(kallsyms_.begin(), kallsyms_.end());
}

frame_desc symbolizer::kernel_frame(uint64_t pc) {
  if (!kallsyms_loaded_) load_kallsyms();
  frame_desc d;
  d.kind = frame_kind::kernel;
  d.module = "[kernel]";
  auto it = std::upper_bound(kallsyms_.begin(), kallsyms_.end(), pc,
                             [](uint64_t v, const auto& s) { return v < s.first; });
  if (it == kallsyms_.begin()) {
    d.name = format("[unknown 0x%llx]", static_cast<unsigned long long>(pc));
    return d;
  }
  d.name = (it - 1)->second;
  d.has_symbol = true;
  return d;
}

}  // namespace jitwalk
