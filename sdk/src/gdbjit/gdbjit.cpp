#include "gdbjit/gdbjit.hpp"

#include <jitunwind/cfi.h>

#include "common/error.hpp"
#include "gdbjit/elf_object.hpp"
#include "gdbjit/symbol_scan.hpp"
#include "perfmap/perfmap_writer.hpp"

#include <elf.h>

#include <algorithm>
#include <cinttypes>
#include <mutex>

using jitunwind::detail::gdbjit::jit_descriptor;

extern "C" {
// This library's own pair (symbols.cpp), reached directly.
extern jit_descriptor jitunwind_gdbjit_descriptor __attribute__((visibility("hidden")));
void jitunwind_gdbjit_register_code() noexcept __attribute__((visibility("hidden")));
}

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
  d.ours = &jitunwind_gdbjit_descriptor;
  if (auto first = first_jit_symbols_in_load_order()) {
    d.first = reinterpret_cast<const jit_descriptor*>(first->descriptor);
    d.first_object = first->object;
    d.first_register_code = first->register_code;
  }
  return d;
}

result<std::vector<uint8_t>> build_object(abi target, std::span<const function_symbol> functions) {
  if (functions.empty())
    return make_error(errc::invalid_argument, "gdb jit: registration without functions");
  const uint16_t machine = elf::machine_for(target);
  if (machine == 0)
    return make_error(errc::unsupported, "gdb jit: ABI %s is not supported", to_string(target));
  uint64_t lo = UINT64_MAX, hi = 0;
  std::vector<const function_symbol*> order;
  order.reserve(functions.size());
  for (const function_symbol& f : functions) {
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
    lo = std::min(lo, f.start);
    hi = std::max(hi, f.start + f.size);
    order.push_back(&f);
  }
  std::sort(order.begin(), order.end(),
            [](const function_symbol* a, const function_symbol* b) { return a->start < b->start; });

  // Absolute FDE addresses: the object's bytes do not depend on where gdb reads them from.
  cfi::encoder_options o;
  o.target = target;
  o.encoding = cfi::address_encoding::absolute;
  auto enc = cfi::encoder::create(o);
  if (!enc) return std::move(enc).error();
  for (const function_symbol* f : order) {
    if (f->frame == nullptr) continue;
    if (auto r = enc->append(*f->frame); !r) return std::move(r).error();
  }
  const std::vector<uint8_t> eh_frame = enc->bytes();

  elf::object_writer w(machine, ET_REL);
  const uint16_t text =
      w.add_section({".text", SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR, lo, 16, {}, hi - lo});
  // Not SHF_ALLOC: gdb still reads the CFI, but does not add the section to its address map
  // (a large registration-time saving, dstogov/ir#129).
  w.add_section({".eh_frame", SHT_PROGBITS, 0, 0, 8, eh_frame, 0});
  for (const function_symbol* f : order) {
    const std::string name = sanitize_symbol_name(f->name);
    w.add_symbol({name, f->start - lo, f->size, text, true, true});
  }
  return w.write();
}

struct registrar::node {
  jit_code_entry entry{};
  std::vector<uint8_t> object;
};

result<std::unique_ptr<registrar>> registrar::create(const registrar_options& options) {
  if (elf::machine_for(options.target) == 0)
    return make_error(errc::unsupported, "gdb jit: ABI %s is not supported",
                      to_string(options.target));
  std::unique_ptr<registrar> r(new registrar());
  r->options_ = options;
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
    r->target_ = &jitunwind_gdbjit_descriptor;
    r->notify_ = &jitunwind_gdbjit_register_code;
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
  auto object = build_object(options_.target, functions);
  if (!object) return std::move(object).error();
  auto n = std::make_unique<node>();
  n->object = std::move(*object);
  n->entry.symfile_addr = reinterpret_cast<const char*>(n->object.data());
  n->entry.symfile_size = n->object.size();

  std::lock_guard lock(descriptor_lock());
  const registration_id id = next_id_++;
  jit_code_entry* e = &n->entry;
  live_.emplace(id, std::move(n));  // may throw bad_alloc before the list is touched
  e->prev_entry = nullptr;
  e->next_entry = target_->first_entry;
  if (e->next_entry != nullptr) e->next_entry->prev_entry = e;
  target_->first_entry = e;
  announce(*target_, notify_, e, jit_register);
  return id;
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
