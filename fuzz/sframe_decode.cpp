// libFuzzer target: SFrame decode/check/table/find/unwind over hostile bytes.
//
// The input is the section itself (placed at a fixed address). Besides "no crash, no UB" it
// checks the invariants the API promises: check() agrees with decode(), a table answers like
// the decoded model, re-encoding what decoded gives the same functions, and an unwind over a
// fake stack made of the same bytes always ends within the frame cap.
#include <jitunwind/sframe.h>

#include "sframe_invariants.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

using namespace jitunwind;
using namespace jitunwind::sframe;
using namespace sframe_fuzz;

namespace {

constexpr uint64_t section_address = 0x400000;
constexpr uint64_t stack_address = 0x7ff000;

struct fake_stack {
  const uint8_t* data;
  size_t size;
  static bool read(void* self, uint64_t address, void* out, size_t len) {
    auto* s = static_cast<fake_stack*>(self);
    if (address < stack_address || address - stack_address > s->size ||
        len > s->size - (address - stack_address))
      return false;
    std::memcpy(out, s->data + (address - stack_address), len);
    return true;
  }
};

const frame_row* model_find(const decoded_section& d, uint64_t pc) {
  static const frame_row outermost = outermost_row(0);
  for (const auto& f : d.functions) {
    if (pc < f.start || pc - f.start >= f.size) continue;
    // v3: a DEFAULT FDE without FREs is an outermost frame (FLEX without FREs says nothing).
    if (f.rows.empty() && d.info.version >= version_3) {
      const size_t i = static_cast<size_t>(&f - d.functions.data());
      return d.layout[i].fde_type == 0 ? &outermost : nullptr;
    }
    uint64_t off = pc - f.start;
    if (f.pcmask_rep) off %= f.pcmask_rep;
    const frame_row* best = nullptr;
    for (const auto& r : f.rows)
      if (r.pc_offset <= off) best = &r;
    return best;
  }
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  auto d = decode_agreeing(bytes, section_address);
  if (!d) return 0;

  auto t = table::create(bytes, section_address);
  if (t.ok()) {
    for (const auto& f : d->functions) {
      for (uint64_t pc : {f.start, f.start + f.size / 2, f.start + f.size - 1, f.start + f.size}) {
        const auto got = t->find(pc);
        const frame_row* want = model_find(*d, pc);
        if (got.has_value() != (want != nullptr)) broken_invariant();
        if (want && !(got->row == *want)) broken_invariant();
      }
    }
    // Unwind from each function over a "stack" made of the input bytes.
    unwinder u(d->info.target);
    if (!u.add(&*t).ok()) broken_invariant();
    fake_stack stack{data, size};
    for (size_t i = 0; i < d->functions.size() && i < 8; ++i) {
      const auto& f = d->functions[i];
      const regs start{f.start + f.size / 2, stack_address, stack_address + size / 2, f.start};
      const auto tr = u.unwind(start, {&fake_stack::read, &stack}, 32);
      if (tr.pcs.size() > 32) broken_invariant();
    }
  }

  // What decodes re-encodes (format rules, same version; v1 as v2) to the same functions.
  (void)reencode_agreeing(*d, section_address);
  return 0;
}
