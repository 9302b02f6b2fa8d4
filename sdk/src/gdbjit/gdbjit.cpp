#include "gdbjit/gdbjit.hpp"

#include <jitunwind/cfi.h>

#include "common/error.hpp"
#include <jitunwind/toolkit/names.hpp>
#include "gdbjit/elf_object.hpp"
#include "gdbjit/growing_object.hpp"
#include <jitunwind/toolkit/gdb_jit.hpp>

#include <elf.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <mutex>

namespace jitunwind::detail::gdbjit {

namespace {

// The descriptor is process-wide, so is its lock (the protocol has no lock of its own).
std::mutex& descriptor_lock() {
  static std::mutex m;
  return m;
}

// Tells gdb about `e`: gdb reads relevant_entry and action_flag while the process is stopped in
// `notify` (its breakpoint), so both are reset right after. Descriptor lock held.
void announce(jit_descriptor& d, void (*notify)() noexcept, jit_code_entry* e, jit_action action) {
  d.relevant_entry = e;
  d.action_flag = action;
  notify();
  d.relevant_entry = nullptr;
  d.action_flag = jit_noaction;
}

// Unlinks `e` from the descriptor's list and announces its removal. Descriptor lock held.
void unregister_entry(jit_descriptor& d, void (*notify)() noexcept, jit_code_entry* e) {
  if (e->prev_entry != nullptr)
    e->prev_entry->next_entry = e->next_entry;
  else
    d.first_entry = e->next_entry;
  if (e->next_entry != nullptr) e->next_entry->prev_entry = e->prev_entry;
  announce(d, notify, e, jit_unregister);
}

}  // namespace

descriptor_info inspect_descriptors() {
  descriptor_info d;
  d.ours = toolkit::gdb_jit::own_descriptor();
  if (auto first = toolkit::gdb_jit::first_jit_symbols_in_load_order()) {
    d.first = reinterpret_cast<const jit_descriptor*>(first->descriptor);
    d.first_object = first->object;
    d.first_register_code = first->register_code;
  }
  return d;
}

namespace {

cfi::encoder_options object_cfi_options(abi target) {
  // Absolute FDE addresses: the object's bytes do not depend on where gdb reads them from.
  cfi::encoder_options o;
  o.target = target;
  o.encoding = cfi::address_encoding::absolute;
  return o;
}

template <class T>
void put(uint8_t* out, size_t at, const T& v) {
  std::memcpy(out + at, &v, sizeof v);
}

// The object gdb reads, written in one pass into one buffer. Layout (what a generic ELF writer
// gives for these sections; tests compare with elf::object_writer): ELF header; .eh_frame
// (8-aligned, right after the header; .text is NOBITS); .symtab (8-aligned); .strtab;
// .shstrtab; section headers (8-aligned): null, .text, .eh_frame, .symtab, .strtab, .shstrtab.
result<void> write_object(cfi::encoder& enc, uint16_t machine,
                          std::span<const function_symbol> functions, std::vector<uint8_t>& out) {
  auto facts = check_batch(functions);
  if (!facts) return std::move(facts).error();
  const uint64_t lo = facts->lo, hi = facts->hi;
  const size_t name_bytes = 1 + facts->name_bytes;
  const size_t n = functions.size();
  auto at = [&](size_t i) -> const function_symbol& { return facts->at(functions, i); };

  enc.clear(0);
  for (size_t i = 0; i < n; ++i) {
    if (at(i).frame == nullptr) continue;
    // Rows .eh_frame cannot carry yet (SFrame v3 register rules) leave that function without
    // unwind info in GDB's object rather than fail the whole object.
    if (auto r = enc.append(*at(i).frame); !r && r.error().code() != errc::unsupported)
      return std::move(r).error();
  }
  const std::span<const uint8_t> eh_frame = enc.data();

  static constexpr char shstrtab[] = "\0.text\0.eh_frame\0.symtab\0.strtab\0.shstrtab";
  constexpr uint32_t text_name = 1, eh_name = 7, symtab_name = 17, strtab_name = 25,
                     shstrtab_name = 33;
  constexpr size_t shstrtab_size = sizeof shstrtab;  // with the final NUL
  const auto align8 = [](size_t v) { return (v + 7) / 8 * 8; };
  const size_t eh_off = sizeof(Elf64_Ehdr);
  const size_t symtab_off = align8(eh_off + eh_frame.size());
  const size_t symtab_size = (n + 1) * sizeof(Elf64_Sym);
  const size_t strtab_off = symtab_off + symtab_size;
  const size_t shstrtab_off = strtab_off + name_bytes;
  const size_t shdr_off = align8(shstrtab_off + shstrtab_size);
  const size_t total = shdr_off + 6 * sizeof(Elf64_Shdr);

  out.assign(total, 0);
  uint8_t* const o = out.data();
  Elf64_Ehdr eh = elf::file_header(ET_REL, machine);
  eh.e_shoff = shdr_off;
  eh.e_shnum = 6;
  eh.e_shstrndx = 5;
  put(o, 0, eh);
  if (!eh_frame.empty()) std::memcpy(o + eh_off, eh_frame.data(), eh_frame.size());

  // Symbols: values are offsets into .text (ET_REL), all global functions.
  size_t name_at = 1;
  for (size_t i = 0; i < n; ++i) {
    const function_symbol& f = at(i);
    put_function_symbol(o + symtab_off + (i + 1) * sizeof(Elf64_Sym),
                        reinterpret_cast<char*>(o + strtab_off + name_at), name_at, lo, f);
    name_at += f.name.size() + 1;
  }
  std::memcpy(o + shstrtab_off, shstrtab, shstrtab_size);

  const auto shdr = [](uint32_t name, uint32_t type, uint64_t flags, uint64_t addr, uint64_t offset,
                       uint64_t size, uint64_t align) {
    Elf64_Shdr h{};
    h.sh_name = name;
    h.sh_type = type;
    h.sh_flags = flags;
    h.sh_addr = addr;
    h.sh_offset = offset;
    h.sh_size = size;
    h.sh_addralign = align;
    return h;
  };
  put(o, shdr_off + 1 * sizeof(Elf64_Shdr),
      shdr(text_name, SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR, lo, eh_off, hi - lo, 16));
  // Not SHF_ALLOC: gdb still reads the CFI, but does not add the section to its address map
  // (a large registration-time saving, dstogov/ir#129).
  put(o, shdr_off + 2 * sizeof(Elf64_Shdr),
      shdr(eh_name, SHT_PROGBITS, 0, 0, eh_off, eh_frame.size(), 8));
  Elf64_Shdr symtab = shdr(symtab_name, SHT_SYMTAB, 0, 0, symtab_off, symtab_size, 8);
  symtab.sh_link = 4;
  symtab.sh_info = 1;  // first global symbol
  symtab.sh_entsize = sizeof(Elf64_Sym);
  put(o, shdr_off + 3 * sizeof(Elf64_Shdr), symtab);
  put(o, shdr_off + 4 * sizeof(Elf64_Shdr),
      shdr(strtab_name, SHT_STRTAB, 0, 0, strtab_off, name_bytes, 1));
  put(o, shdr_off + 5 * sizeof(Elf64_Shdr),
      shdr(shstrtab_name, SHT_STRTAB, 0, 0, shstrtab_off, shstrtab_size, 1));
  return {};
}

}  // namespace

result<std::vector<uint8_t>> build_object(abi target, std::span<const function_symbol> functions) {
  const uint16_t machine = elf::machine_for(target);
  if (machine == 0)
    return make_error(errc::unsupported, "gdb jit: ABI %s is not supported", to_string(target));
  auto enc = cfi::encoder::create(object_cfi_options(target));
  if (!enc) return std::move(enc).error();
  std::vector<uint8_t> out;
  if (auto r = write_object(*enc, machine, functions, out); !r) return std::move(r).error();
  return out;
}

struct registrar::node {
  jit_code_entry entry{};
  std::vector<uint8_t> object;              // add(): built whole
  std::unique_ptr<growing_object> growing;  // append(): grows in place
};

result<std::unique_ptr<registrar>> registrar::create(const registrar_options& options) {
  if (elf::machine_for(options.target) == 0)
    return make_error(errc::unsupported, "gdb jit: ABI %s is not supported",
                      to_string(options.target));
  auto enc = cfi::encoder::create(object_cfi_options(options.target));
  if (!enc) return std::move(enc).error();
  std::unique_ptr<registrar> r(new registrar());
  r->options_ = options;
  r->cfi_.emplace(std::move(*enc));
  r->info_ = inspect_descriptors();
  descriptor_info& d = r->info_;
  // The first definer's function, to call in `shared` mode.
  void (*first_notify)() noexcept = nullptr;
  if (d.first != nullptr && d.first != d.ours)
    first_notify = reinterpret_cast<void (*)() noexcept>(d.first_register_code);
  descriptor_policy chosen = options.policy;
  if (chosen == descriptor_policy::automatic) {
    chosen = first_notify == nullptr ? descriptor_policy::own : descriptor_policy::shared;
    if (chosen == descriptor_policy::shared)
      options.log(log_level::info,
                  format("gdb jit: %s defines __jit_debug_descriptor and loads before us; gdb "
                         "reads only that one, so our entries join its list",
                         d.first_object.empty() ? "the main program" : d.first_object.c_str()));
  } else if (chosen == descriptor_policy::shared && first_notify == nullptr && d.first == nullptr) {
    return make_error(errc::not_found,
                      "gdb jit: descriptor policy 'shared' but no loaded object defines "
                      "__jit_debug_descriptor and __jit_debug_register_code");
  }
  d.policy = chosen;
  if (chosen == descriptor_policy::shared && first_notify != nullptr) {
    r->target_ = const_cast<jit_descriptor*>(d.first);
    r->notify_ = first_notify;
    if (r->target_->version != 1)
      return make_error(errc::unsupported,
                        "gdb jit: the __jit_debug_descriptor of %s has version %u (only 1 is "
                        "known)",
                        d.first_object.empty() ? "the main program" : d.first_object.c_str(),
                        r->target_->version);
  } else {
    // own, or shared when we are the first definer ourselves.
    r->target_ = toolkit::gdb_jit::own_descriptor();
    r->notify_ = toolkit::gdb_jit::own_register_code();
  }
  d.used = r->target_;
  return r;
}

registrar::~registrar() {
  std::lock_guard lock(descriptor_lock());
  for (auto& [id, n] : live_) unregister_entry(*target_, notify_, &n->entry);
}

size_t registrar::live_registrations() const {
  std::lock_guard lock(descriptor_lock());
  return live_.size();
}

result<registration_id> registrar::add(std::span<const function_symbol> functions) {
  auto n = std::make_unique<node>();
  {
    std::lock_guard lock(build_mutex_);
    if (auto r = write_object(*cfi_, elf::machine_for(options_.target), functions, n->object); !r)
      return std::move(r).error();
  }
  n->entry.symfile_addr = reinterpret_cast<const char*>(n->object.data());
  n->entry.symfile_size = n->object.size();

  std::lock_guard lock(descriptor_lock());
  return link(std::move(n));
}

registration_id registrar::link(std::unique_ptr<node> n) {
  const registration_id id = next_id_++;
  jit_code_entry* e = &n->entry;
  if (n->growing) {
    e->symfile_addr = reinterpret_cast<const char*>(n->growing->data());
    e->symfile_size = n->growing->capacity();
  }
  live_.emplace(id, std::move(n));  // may throw bad_alloc before the list is touched
  e->prev_entry = nullptr;
  e->next_entry = target_->first_entry;
  if (e->next_entry != nullptr) e->next_entry->prev_entry = e;
  target_->first_entry = e;
  announce(*target_, notify_, e, jit_register);
  return id;
}

void registrar::reannounce(jit_code_entry& e) {
  // A debugger our check cannot see (no software breakpoint) reads the object again.
  announce(*target_, notify_, &e, jit_unregister);
  announce(*target_, notify_, &e, jit_register);
}

bool registrar::debugger_attached() const noexcept {
  return breakpoint_at(reinterpret_cast<const void*>(notify_));
}

result<registrar::appended> registrar::append(registration_id id,
                                              std::span<const function_symbol> functions) {
  if (id != 0) {
    // Functions shaped like the object's last (most of a JIT's) need no encoder, so not its
    // lock either.
    std::lock_guard lock(descriptor_lock());
    auto it = live_.find(id);
    if (it != live_.end() && it->second->growing && !debugger_attached()) {
      auto added = it->second->growing->append_without_encoder(functions);
      if (!added) return std::move(added).error();
      if (*added) {
        reannounce(it->second->entry);
        return appended{id, false};
      }
    }
  }
  std::lock_guard build(build_mutex_);
  std::lock_guard lock(descriptor_lock());
  node* held = nullptr;
  if (id != 0) {
    auto it = live_.find(id);
    if (it == live_.end() || !it->second->growing)
      return make_error(errc::not_found, "gdb jit: no growing registration %" PRIu64, id);
    held = it->second.get();
  }
  std::unique_ptr<node> n;
  bool replaced = false;
  if (held != nullptr && !debugger_attached()) {
    auto added = held->growing->append(*cfi_, functions);
    if (!added) return std::move(added).error();
    if (*added) {
      reannounce(held->entry);
      return appended{id, false};
    }
    auto bigger = held->growing->grown(*cfi_, functions);
    if (!bigger) return std::move(bigger).error();
    n = std::make_unique<node>();
    n->growing = std::move(*bigger);
    replaced = true;
  } else {
    auto fresh =
        growing_object::create(*cfi_, elf::machine_for(options_.target), functions);
    if (!fresh) return std::move(fresh).error();
    n = std::make_unique<node>();
    n->growing = std::move(*fresh);
  }
  // The new object is in the list before the old one leaves it: a debugger attaching meanwhile
  // sees every function (some twice) rather than some not at all.
  const registration_id new_id = link(std::move(n));
  if (replaced) {
    unregister_entry(*target_, notify_, &held->entry);
    live_.erase(id);
  }
  return appended{new_id, replaced};
}

result<registration_id> registrar::remove_function(registration_id id, uint64_t start) {
  std::lock_guard lock(descriptor_lock());
  auto it = live_.find(id);
  if (it == live_.end() || !it->second->growing)
    return make_error(errc::not_found, "gdb jit: no growing registration %" PRIu64, id);
  std::unique_ptr<growing_object> rest = it->second->growing->without(start);
  if (rest == nullptr)
    return make_error(errc::not_found,
                      "gdb jit: registration %" PRIu64 " has no function at 0x%" PRIx64, id, start);
  registration_id new_id = 0;
  if (rest->function_count() != 0) {
    auto n = std::make_unique<node>();
    n->growing = std::move(rest);
    new_id = link(std::move(n));
  }
  unregister_entry(*target_, notify_, &it->second->entry);
  live_.erase(it);
  return new_id;
}

result<void> registrar::remove(registration_id id) {
  std::lock_guard lock(descriptor_lock());
  auto it = live_.find(id);
  if (it == live_.end())
    return make_error(errc::not_found, "gdb jit: no live registration %" PRIu64, id);
  unregister_entry(*target_, notify_, &it->second->entry);
  live_.erase(it);  // gdb has read what it needed while stopped in notify_()
  return {};
}

}  // namespace jitunwind::detail::gdbjit
