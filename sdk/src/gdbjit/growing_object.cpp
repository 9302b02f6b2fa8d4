#include "gdbjit/growing_object.hpp"

#include "common/error.hpp"
#include "common/same_rows.hpp"
#include <jitunwind/toolkit/names.hpp>
#include "gdbjit/elf_object.hpp"

#include <elf.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cinttypes>
#include <cstring>

namespace jitunwind::detail::gdbjit {

namespace {

template <class T>
void put_at(uint8_t* out, size_t at, const T& v) {
  std::memcpy(out + at, &v, sizeof v);
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Section header table, .shstrtab and the sections, as laid out by growing_object.
constexpr char shstrtab[] = "\0.text\0.eh_frame\0.symtab\0.strtab\0.shstrtab";
constexpr uint32_t text_name = 1, eh_name = 7, symtab_name = 17, strtab_name = 25,
                   shstrtab_name = 33;
constexpr size_t section_count = 6;
constexpr size_t shdr_offset = sizeof(Elf64_Ehdr);
constexpr size_t shstrtab_offset = shdr_offset + section_count * sizeof(Elf64_Shdr);
constexpr size_t eh_frame_offset = (shstrtab_offset + sizeof shstrtab + 7) / 8 * 8;
constexpr size_t align8(size_t v) { return (v + 7) / 8 * 8; }

size_t shdr_field(size_t section, size_t field_offset) {
  return shdr_offset + section * sizeof(Elf64_Shdr) + field_offset;
}

// Copies `size` bytes of whole FDEs from `src` to `eh + at` and points each one's CIE pointer
// (relative to the field) at the CIE at the start of `eh`.
void copy_fdes(uint8_t* eh, size_t at, const uint8_t* src, size_t size) {
  std::memmove(eh + at, src, size);
  for (size_t p = at; p + 8 <= at + size;) {
    const uint32_t length = load_u32(eh + p);
    put_at(eh, p + 4, static_cast<uint32_t>(p + 4));
    p += 4 + length;
  }
}

}  // namespace

result<batch_facts> check_batch(std::span<const function_symbol> functions) {
  if (functions.empty())
    return make_error(errc::invalid_argument, "gdb jit: registration without functions");
  batch_facts b;
  b.lo = UINT64_MAX;
  b.name_bytes = 1;
  bool sorted = true;
  for (size_t i = 0; i < functions.size(); ++i) {
    const function_symbol& f = functions[i];
    if (f.name.empty())
      return make_error(errc::invalid_argument, "gdb jit: function at 0x%" PRIx64 " has no name",
                        f.start);
    if (f.size == 0 || f.start > UINT64_MAX - f.size)
      return make_error(errc::invalid_argument,
                        "gdb jit: function %.*s at 0x%" PRIx64 " has a bad size 0x%" PRIx64,
                        static_cast<int>(f.name.size()), f.name.data(), f.start, f.size);
    if (f.frame != nullptr && (f.frame->start != f.start || f.frame->size > f.size))
      return make_error(errc::invalid_argument,
                        "gdb jit: rows of %.*s describe [0x%" PRIx64
                        ", +%u), not the function "
                        "[0x%" PRIx64 ", +%" PRIu64 ")",
                        static_cast<int>(f.name.size()), f.name.data(), f.frame->start,
                        f.frame->size, f.start, f.size);
    b.lo = std::min(b.lo, f.start);
    b.hi = std::max(b.hi, f.start + f.size);
    sorted &= i == 0 || functions[i - 1].start <= f.start;
    b.name_bytes += f.name.size() + 1;
  }
  b.name_bytes -= 1;  // the leading NUL is the table's, not the batch's
  // Symbols and FDEs in address order (a window's functions already are).
  if (!sorted) {
    b.order.reserve(functions.size());
    for (const function_symbol& f : functions) b.order.push_back(&f);
    std::stable_sort(
        b.order.begin(), b.order.end(),
        [](const function_symbol* x, const function_symbol* y) { return x->start < y->start; });
  }
  return b;
}

growing_object::growing_object(uint16_t machine, const sizes& cap, std::span<const uint8_t> cie,
                               uint64_t lo)
    : machine_(machine), cap_(cap), cie_size_(cie.size()), eh_size_(cie.size()), lo_(lo), hi_(lo) {
  capacity_ = strtab_offset() + cap_.names;
  buf_ = std::make_unique<uint8_t[]>(capacity_);  // zeroed: the gaps read as zero
  std::memcpy(buf_.get() + eh_frame_offset, cie.data(), cie.size());
  write_headers(machine);
  commit(lo);
}

size_t growing_object::symtab_offset() const noexcept {
  return eh_frame_offset + align8(cap_.eh_frame);
}

size_t growing_object::strtab_offset() const noexcept {
  return symtab_offset() + cap_.symbols * sizeof(Elf64_Sym);
}

void growing_object::write_headers(uint16_t machine) {
  uint8_t* const o = buf_.get();
  Elf64_Ehdr eh = elf::file_header(ET_REL, machine);
  eh.e_shoff = shdr_offset;
  eh.e_shnum = section_count;
  eh.e_shstrndx = 5;
  put_at(o, 0, eh);
  std::memcpy(o + shstrtab_offset, shstrtab, sizeof shstrtab);
  const auto shdr = [&](size_t index, uint32_t name, uint32_t type, uint64_t flags,
                        uint64_t offset, uint64_t align) {
    Elf64_Shdr h{};
    h.sh_name = name;
    h.sh_type = type;
    h.sh_flags = flags;
    h.sh_offset = offset;
    h.sh_addralign = align;
    if (type == SHT_SYMTAB) {
      h.sh_link = 4;
      h.sh_info = 1;  // first global symbol
      h.sh_entsize = sizeof(Elf64_Sym);
    }
    put_at(o, shdr_offset + index * sizeof(Elf64_Shdr), h);
  };
  shdr(1, text_name, SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR, eh_frame_offset, 16);
  // Not SHF_ALLOC: gdb still reads the CFI, but does not add the section to its address map
  // (a large registration-time saving, dstogov/ir#129).
  shdr(2, eh_name, SHT_PROGBITS, 0, eh_frame_offset, 8);
  shdr(3, symtab_name, SHT_SYMTAB, 0, symtab_offset(), 8);
  shdr(4, strtab_name, SHT_STRTAB, 0, strtab_offset(), 1);
  shdr(5, shstrtab_name, SHT_STRTAB, 0, shstrtab_offset, 1);
  put_at(o, shdr_field(5, offsetof(Elf64_Shdr, sh_size)), uint64_t{sizeof shstrtab});
}

void growing_object::commit(uint64_t hi) {
  uint8_t* const o = buf_.get();
  const auto size_of = [&](size_t section, uint64_t v) {
    put_at(o, shdr_field(section, offsetof(Elf64_Shdr, sh_size)), v);
    // A debugger that stops the process between two of these stores sees a whole object.
    std::atomic_signal_fence(std::memory_order_seq_cst);
  };
  hi_ = std::max(hi_, hi);
  put_at(o, shdr_field(1, offsetof(Elf64_Shdr, sh_addr)), lo_);
  size_of(1, hi_ - lo_);
  size_of(4, names_size_);
  size_of(2, eh_size_);
  size_of(3, symbols_ * sizeof(Elf64_Sym));
}

namespace {

// The batch's FDEs, encoded into `enc`: each function's byte range in enc.data().
template <class Record>
result<void> encode(cfi::encoder& enc, std::span<const function_symbol> functions,
                    const batch_facts& b, std::vector<Record>& out) {
  enc.clear(0);
  for (size_t i = 0; i < functions.size(); ++i) {
    const function_symbol& s = b.at(functions, i);
    const size_t before = enc.data().size();
    // Rows .eh_frame cannot carry yet (SFrame v3 register rules) leave that function without
    // unwind info in GDB's object rather than fail the whole object.
    if (s.frame != nullptr) {
      if (auto r = enc.append(*s.frame); !r && r.error().code() != errc::unsupported)
        return std::move(r).error();
    }
    out.push_back({s.start, static_cast<uint32_t>(before),
                   static_cast<uint32_t>(enc.data().size() - before)});
  }
  return {};
}

}  // namespace

void growing_object::put(cfi::encoder& enc, std::span<const function_symbol> functions,
                         const batch_facts& b) {
  uint8_t* const o = buf_.get();
  uint8_t* const eh = o + eh_frame_offset;
  const size_t first = functions_.size() - functions.size();
  for (size_t i = 0; i < functions.size(); ++i) {
    const function_symbol& f = b.at(functions, i);
    record& r = functions_[first + i];
    if (r.fde_size != 0) {
      copy_fdes(eh, eh_size_, enc.data().data() + r.fde_offset, r.fde_size);
      r.fde_offset = static_cast<uint32_t>(eh_size_);
      eh_size_ += r.fde_size;
    }
    put_symbol(f);
  }
}

void put_function_symbol(uint8_t* sym_at, char* name_at, size_t name_offset, uint64_t text_lo,
                         const function_symbol& f) {
  Elf64_Sym sym{};
  sym.st_name = static_cast<uint32_t>(name_offset);
  sym.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
  sym.st_shndx = 1;
  sym.st_value = f.start - text_lo;
  sym.st_size = f.size;
  std::memcpy(sym_at, &sym, sizeof sym);
  if (f.clean_name)
    std::memcpy(name_at, f.name.data(), f.name.size());
  else
    copy_sanitized(name_at, f.name);
}

void growing_object::put_symbol(const function_symbol& f) {
  uint8_t* const o = buf_.get();
  char* name = reinterpret_cast<char*>(o + strtab_offset() + names_size_);
  put_function_symbol(o + symtab_offset() + symbols_ * sizeof(Elf64_Sym), name, names_size_, lo_,
                      f);
  name[f.name.size()] = '\0';
  ++symbols_;
  names_size_ += f.name.size() + 1;
}

namespace {

// What the .eh_frame encoder writes for a function does not depend on more than its rows, start
// and size when the function has one FDE and no saved registers (the encoder's own shape cache
// relies on the same); these are the conditions under which it also passes validation when its
// rows are those of a function that did.
bool shape_reusable(const function_desc& f) {
  return f.pcmask_rep == 0 && f.saved_registers.empty() && f.size != 0 && !f.rows.empty() &&
         f.rows.back().pc_offset < f.size && f.start <= UINT64_MAX - f.size;
}

// The absolute-address FDE's header: length, CIE pointer, start, size, augmentation length.
constexpr size_t fde_header = 4 + 4 + 8 + 8 + 1;

}  // namespace

bool growing_object::append_like_shape(std::span<const function_symbol> functions,
                                       const batch_facts& b) {
  if (shape_fde_.empty() || !b.order.empty()) return false;
  size_t fde_bytes = 0;
  for (const function_symbol& f : functions) {
    if (f.frame == nullptr) continue;
    if (!shape_reusable(*f.frame) || !same_rows(f.frame->rows, shape_rows_)) return false;
    fde_bytes += shape_fde_.size();
  }
  if (eh_size_ + fde_bytes > cap_.eh_frame) return false;  // append() says so after encoding
  uint8_t* const eh = buf_.get() + eh_frame_offset;
  for (const function_symbol& f : functions) {
    record r{f.start, 0, 0};
    if (f.frame != nullptr) {
      uint8_t* p = eh + eh_size_;
      std::memcpy(p, shape_fde_.data(), shape_fde_.size());
      // .eh_frame is little-endian (cfi/dwarf.hpp), like the hosts gdb reads this object on.
      static_assert(std::endian::native == std::endian::little);
      put_at(p, 4, static_cast<uint32_t>(eh_size_ + 4));  // back to the CIE
      put_at(p, 8, f.frame->start);
      put_at(p, 16, uint64_t{f.frame->size});
      r.fde_offset = static_cast<uint32_t>(eh_size_);
      r.fde_size = static_cast<uint32_t>(shape_fde_.size());
      eh_size_ += shape_fde_.size();
    }
    functions_.push_back(r);
    put_symbol(f);
  }
  commit(b.hi);
  return true;
}

void growing_object::learn_shape(std::span<const function_symbol> functions, const batch_facts& b,
                                 size_t first) {
  for (size_t i = functions.size(); i-- > 0;) {
    const function_symbol& f = b.at(functions, i);
    const record& r = functions_[first + i];
    if (f.frame == nullptr || !shape_reusable(*f.frame) || r.fde_size <= fde_header) continue;
    const uint8_t* fde = buf_.get() + eh_frame_offset + r.fde_offset;
    shape_fde_.assign(fde, fde + r.fde_size);
    shape_rows_.assign(f.frame->rows.begin(), f.frame->rows.end());
    return;
  }
}

result<std::unique_ptr<growing_object>> growing_object::create(
    cfi::encoder& enc, uint16_t machine, std::span<const function_symbol> functions, size_t room) {
  auto b = check_batch(functions);
  if (!b) return std::move(b).error();
  std::vector<record> records;
  records.reserve(functions.size());
  if (auto r = encode(enc, functions, *b, records); !r) return std::move(r).error();
  const size_t cie = records.empty() ? enc.data().size() : records.front().fde_offset;
  const size_t fde_bytes = enc.data().size() - cie;
  // Room for `slots` functions like these.
  const size_t n = functions.size();
  const size_t slots = std::max({room, 2 * n, size_t{16}});
  const size_t fde_each = std::max<size_t>(48, (fde_bytes + n - 1) / n);
  const size_t name_each = std::max<size_t>(32, (b->name_bytes + n - 1) / n);
  const sizes cap{cie + slots * fde_each, 1 + slots, 1 + slots * name_each};
  std::unique_ptr<growing_object> o(
      new growing_object(machine, cap, std::span(enc.data().data(), cie), b->lo));
  o->functions_ = std::move(records);
  o->put(enc, functions, *b);
  o->commit(b->hi);
  o->learn_shape(functions, *b, 0);
  return o;
}

result<bool> growing_object::append_without_encoder(std::span<const function_symbol> functions) {
  if (shape_fde_.empty()) return false;
  auto b = check_batch(functions);
  if (!b) return std::move(b).error();
  if (b->lo < lo_ || symbols_ + functions.size() > cap_.symbols ||
      names_size_ + b->name_bytes > cap_.names)
    return false;
  return append_like_shape(functions, *b);
}

result<bool> growing_object::append(cfi::encoder& enc,
                                    std::span<const function_symbol> functions) {
  auto b = check_batch(functions);
  if (!b) return std::move(b).error();
  if (b->lo < lo_ || symbols_ + functions.size() > cap_.symbols ||
      names_size_ + b->name_bytes > cap_.names)
    return false;
  if (append_like_shape(functions, *b)) return true;
  const size_t first = functions_.size();
  if (auto r = encode(enc, functions, *b, functions_); !r) {
    functions_.resize(first);
    return std::move(r).error();
  }
  const size_t fde_bytes = enc.data().size() - cie_size_;
  if (eh_size_ + fde_bytes > cap_.eh_frame) {
    functions_.resize(first);
    return false;
  }
  put(enc, functions, *b);
  commit(b->hi);
  learn_shape(functions, *b, first);
  return true;
}

result<std::unique_ptr<growing_object>> growing_object::grown(
    cfi::encoder& enc, std::span<const function_symbol> functions) const {
  auto b = check_batch(functions);
  if (!b) return std::move(b).error();
  std::vector<record> batch;
  batch.reserve(functions.size());
  if (auto r = encode(enc, functions, *b, batch); !r) return std::move(r).error();
  const size_t fde_bytes = enc.data().size() - cie_size_;
  // Room for what is held, the batch and three times as many functions again as both: a
  // window's object is copied about three times on its way to 1024 functions.
  const size_t held = functions_.size(), n = functions.size();
  const size_t slots = 3 * (held + n);
  const size_t fde_each = std::max<size_t>(48, (eh_size_ - cie_size_) / std::max<size_t>(1, held));
  const size_t name_each = std::max<size_t>(32, names_size_ / std::max<size_t>(1, held));
  const sizes cap{eh_size_ + fde_bytes + slots * fde_each, symbols_ + n + slots,
                  names_size_ + b->name_bytes + slots * name_each};
  std::unique_ptr<growing_object> o(new growing_object(
      machine_, cap, std::span(data() + eh_frame_offset, cie_size_), std::min(lo_, b->lo)));
  uint8_t* const out = o->buf_.get();
  // What this object holds (FDEs keep their offsets), symbols rebased to the copy's first
  // address.
  std::memcpy(out + eh_frame_offset + cie_size_, data() + eh_frame_offset + cie_size_,
              eh_size_ - cie_size_);
  o->eh_size_ = eh_size_;
  std::memcpy(out + o->strtab_offset(), data() + strtab_offset(), names_size_);
  o->names_size_ = names_size_;
  for (size_t i = 1; i < symbols_; ++i) {
    Elf64_Sym sym;
    std::memcpy(&sym, data() + symtab_offset() + i * sizeof sym, sizeof sym);
    sym.st_value += lo_ - o->lo_;
    put_at(out, o->symtab_offset() + i * sizeof sym, sym);
  }
  o->symbols_ = symbols_;
  o->functions_.reserve(held + n);
  o->functions_ = functions_;
  o->functions_.insert(o->functions_.end(), batch.begin(), batch.end());
  o->hi_ = hi_;
  o->put(enc, functions, *b);
  o->commit(b->hi);
  o->shape_rows_ = shape_rows_;
  o->shape_fde_ = shape_fde_;
  o->learn_shape(functions, *b, held);
  return o;
}

std::unique_ptr<growing_object> growing_object::without(uint64_t start) const {
  const auto gone = std::find_if(functions_.begin(), functions_.end(),
                                 [&](const record& r) { return r.start == start; });
  if (gone == functions_.end()) return nullptr;
  std::unique_ptr<growing_object> o(
      new growing_object(machine_, cap_, std::span(data() + eh_frame_offset, cie_size_), lo_));
  uint8_t* const out = o->buf_.get();
  for (size_t i = 0; i < functions_.size(); ++i) {
    if (functions_.begin() + static_cast<ptrdiff_t>(i) == gone) continue;
    record r = functions_[i];
    if (r.fde_size != 0) {
      copy_fdes(out + eh_frame_offset, o->eh_size_, data() + eh_frame_offset + r.fde_offset,
                r.fde_size);
      r.fde_offset = static_cast<uint32_t>(o->eh_size_);
      o->eh_size_ += r.fde_size;
    }
    Elf64_Sym sym;
    std::memcpy(&sym, data() + symtab_offset() + (i + 1) * sizeof sym, sizeof sym);
    const char* name = reinterpret_cast<const char*>(data() + strtab_offset() + sym.st_name);
    const size_t len = std::strlen(name) + 1;
    std::memcpy(out + o->strtab_offset() + o->names_size_, name, len);
    sym.st_name = static_cast<uint32_t>(o->names_size_);
    o->names_size_ += len;
    put_at(out, o->symtab_offset() + o->symbols_ * sizeof sym, sym);
    ++o->symbols_;
    o->functions_.push_back(r);
  }
  o->commit(hi_);
  return o;
}

bool breakpoint_at(const void* code) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return *static_cast<const volatile uint8_t*>(code) == 0xcc;  // int3
#elif defined(__aarch64__)
  const uint32_t insn = *static_cast<const volatile uint32_t*>(code);
  return (insn & 0xffe0001fu) == 0xd4200000u;  // brk #imm
#else
  (void)code;
  return true;  // cannot tell: behave as if a debugger reads every registration
#endif
}

}  // namespace jitunwind::detail::gdbjit
