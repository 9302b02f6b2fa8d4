#include <jitunwind/toolkit/gdb_jit.hpp>

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string_view>
#include <vector>

namespace jitunwind::toolkit::gdb_jit {

namespace {

constexpr std::string_view descriptor_name = "__jit_debug_descriptor";
constexpr std::string_view register_name = "__jit_debug_register_code";

// A read-only mapping of a file, unmapped on destruction.
class mapped_file {
 public:
  explicit mapped_file(const char* path) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const uint8_t*>(p);
        size_ = static_cast<size_t>(st.st_size);
      }
    }
    ::close(fd);
  }
  ~mapped_file() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  bool has(uint64_t off, uint64_t len) const { return off <= size_ && len <= size_ - off; }
  template <class T>
  bool read(uint64_t off, T* out) const {
    if (!has(off, sizeof(T))) return false;
    std::memcpy(out, data_ + off, sizeof(T));
    return true;
  }
  // The NUL-terminated string at `off` within [lo, lo + len), or empty.
  std::string_view string_at(uint64_t lo, uint64_t len, uint64_t off) const {
    if (!has(lo, len) || off >= len) return {};
    const char* s = reinterpret_cast<const char*>(data_ + lo + off);
    const void* nul = std::memchr(s, 0, len - off);
    if (nul == nullptr) return {};
    return {s, static_cast<size_t>(static_cast<const char*>(nul) - s)};
  }
  bool ok() const { return data_ != nullptr; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Definitions (st_value) of both names in one ELF64 file's .symtab/.dynsym; every offset is
// checked against the file size.
bool find_in_file(const char* path, uint64_t* descriptor, uint64_t* register_code) {
  mapped_file f(path);
  if (!f.ok()) return false;
  Elf64_Ehdr eh;
  if (!f.read(0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr))
    return false;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  for (uint16_t i = 0; i < eh.e_shnum; ++i)
    if (!f.read(eh.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr), &sh[i])) return false;
  *descriptor = *register_code = 0;
  for (const Elf64_Shdr& s : sh) {
    if ((s.sh_type != SHT_SYMTAB && s.sh_type != SHT_DYNSYM) || s.sh_link >= sh.size() ||
        s.sh_entsize != sizeof(Elf64_Sym) || !f.has(s.sh_offset, s.sh_size))
      continue;
    const Elf64_Shdr& str = sh[s.sh_link];
    for (uint64_t k = 1; k < s.sh_size / sizeof(Elf64_Sym); ++k) {
      Elf64_Sym sym;
      if (!f.read(s.sh_offset + k * sizeof(Elf64_Sym), &sym)) break;
      if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
      const std::string_view name = f.string_at(str.sh_offset, str.sh_size, sym.st_name);
      if (name == descriptor_name && *descriptor == 0) *descriptor = sym.st_value;
      if (name == register_name && *register_code == 0) *register_code = sym.st_value;
    }
  }
  return *descriptor != 0 && *register_code != 0;
}

struct scan_state {
  std::optional<jit_symbols> found;
};

int scan_object(dl_phdr_info* info, size_t, void* data) {
  auto* st = static_cast<scan_state*>(data);
  const bool main_program = info->dlpi_name == nullptr || info->dlpi_name[0] == '\0';
  const char* path = main_program ? "/proc/self/exe" : info->dlpi_name;
  if (!main_program && info->dlpi_name[0] != '/') return 0;  // vDSO and the like: no file
  uint64_t descriptor = 0, register_code = 0;
  if (!find_in_file(path, &descriptor, &register_code)) return 0;
  st->found = jit_symbols{static_cast<uintptr_t>(info->dlpi_addr + descriptor),
                          static_cast<uintptr_t>(info->dlpi_addr + register_code),
                          main_program ? std::string() : std::string(info->dlpi_name)};
  return 1;
}

}  // namespace

std::optional<jit_symbols> first_jit_symbols_in_load_order() {
  scan_state st;
  dl_iterate_phdr(scan_object, &st);
  return st.found;
}

}  // namespace jitunwind::toolkit::gdb_jit
