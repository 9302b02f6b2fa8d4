#include "registry_traps.hpp"

#include <jitunwind/toolkit/elf_reader.hpp>
#include <jitunwind/toolkit/guarded_file.hpp>

#include <jitunwind/usdt.h>

#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>

namespace jitunwind::cli::tracee {

namespace {

// The byte at `address` in the stopped thread's memory.
std::optional<uint8_t> byte_at(pid_t pid, uint64_t address) {
  errno = 0;
  const long word = ptrace(PTRACE_PEEKTEXT, pid, address & ~uint64_t{7}, nullptr);
  if (errno != 0) return std::nullopt;
  return static_cast<uint8_t>(static_cast<uint64_t>(word) >> ((address & 7) * 8));
}

// The permissions ("r-xp") of the mapping that holds `address`, from /proc/PID/maps.
std::string permissions_at(const std::string& maps, uint64_t address) {
  std::istringstream lines(maps);
  for (std::string line; std::getline(lines, line);) {
    char* end = nullptr;
    const uint64_t start = std::strtoull(line.c_str(), &end, 16);
    if (end == nullptr || *end != '-') continue;
    const uint64_t stop = std::strtoull(end + 1, &end, 16);
    if (address >= start && address < stop && end != nullptr && *end == ' ')
      return std::string(end + 1, std::min<size_t>(4, std::strlen(end + 1)));
  }
  return "";
}

// The load bias of the object that defines registry `r`: the run-time address of its
// `jitunwind_registry` symbol minus the link-time one.
std::optional<uint64_t> load_bias(const toolkit::elf_image& elf,
                                  const remote::registry_location& r) {
  for (const toolkit::elf_section& sec : elf.sections()) {
    if (sec.type != toolkit::elf_sht_dynsym && sec.type != toolkit::elf_sht_symtab) continue;
    auto symbols = elf.symbols(sec);
    if (!symbols) continue;
    for (const toolkit::elf_symbol& sym : *symbols)
      if (sym.name == "jitunwind_registry" && sym.value != 0) return r.address - sym.value;
  }
  return std::nullopt;
}

}  // namespace

void registry_traps::find(pid_t pid, const remote::registry_reader& reader) {
  if (!sites_.empty()) return;
  for (const remote::registry_location& r : reader.registries()) find_in(pid, r);
}

void registry_traps::find_in(pid_t pid, const remote::registry_location& r) {
  auto bytes = toolkit::read_whole_file("/proc/" + std::to_string(pid) + "/root" + r.object_path);
  if (!bytes) return;
  auto elf = toolkit::elf_image::parse(*bytes);
  auto notes = usdt::read_sdt_notes(*bytes);
  if (!elf || !notes) return;
  const std::optional<uint64_t> bias = load_bias(*elf, r);
  if (!bias) return;
  for (const usdt::sdt_note& n : *notes)
    if (n.provider == "jitunwind_registry" && n.name == "change") sites_.push_back(n.pc + *bias);
}

void registry_traps::refresh(pid_t pid) {
  std::optional<std::string> maps;  // read only if a site is not armed yet
  for (uint64_t pc : sites_) {
    if (breakpoints_.has(pc)) {
      breakpoints_.reassert(pid, pc);
      continue;
    }
    if (!maps) maps = toolkit::proc_text_or_empty("/proc/" + std::to_string(pid) + "/maps");
    const std::string p = permissions_at(*maps, pc);
    if (p.size() > 2 && p[2] == 'x' && byte_at(pid, pc) == 0x90)  // a probe site is a nop
      breakpoints_.insert(pid, pc);
  }
}

void registry_traps::disarm(pid_t pid) {
  for (uint64_t pc : sites_) breakpoints_.remove(pid, pc);
}

void registry_traps::forget() {
  breakpoints_.forget();
  sites_.clear();
}

bool registry_traps::hit(pid_t pid, int status) const {
  if (sites_.empty() || !WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP || (status >> 16) != 0)
    return false;
  user_regs_struct r{};
  if (ptrace(PTRACE_GETREGS, pid, nullptr, &r) != 0) return false;
  siginfo_t info{};
  if (ptrace(PTRACE_GETSIGINFO, pid, nullptr, &info) != 0 || info.si_code != SI_KERNEL)
    return false;
  return std::find(sites_.begin(), sites_.end(), r.rip - 1) != sites_.end();
}

}  // namespace jitunwind::cli::tracee
