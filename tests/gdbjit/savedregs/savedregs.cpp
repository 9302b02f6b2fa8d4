// A JIT function whose rows come from a compiler's .eh_frame (this program's own, read in
// memory and decoded with cfi::decode), published through the GDB JIT interface; then a second
// copy described from C alone (the C frame builder's save_register directives, a C session and
// window). gdb must show the caller's rbx and r12 in the frame above each JIT frame
// (tests/gdbjit/gdb_test.cpp).
#include <jitunwind/cfi.h>
#include <jitunwind/jitunwind.h>
#include <jitunwind/window.h>

#include <link.h>

#include <cstdio>
#include <cstring>

extern "C" void jit_template();
extern "C" uint64_t call_with_rbx(uint64_t jit, void (*native)());
extern "C" __attribute__((noinline)) void native_breakpoint() {
  asm volatile("" ::: "memory");
}

namespace {

struct eh_frame_location {
  uint64_t address = 0;
  uint64_t limit = 0;  // end of the segment that holds it
};

// The executable's .eh_frame, found through PT_GNU_EH_FRAME (.eh_frame_hdr's eh_frame_ptr).
int find_eh_frame(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<eh_frame_location*>(data);
  if (out->address != 0) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type != PT_GNU_EH_FRAME) continue;
    const auto* hdr = reinterpret_cast<const uint8_t*>(info->dlpi_addr + p.p_vaddr);
    if (hdr[0] != 1 || hdr[1] != 0x1b) return 0;  // version 1, pcrel|sdata4
    int32_t rel;
    std::memcpy(&rel, hdr + 4, 4);
    out->address = reinterpret_cast<uint64_t>(hdr + 4) + static_cast<int64_t>(rel);
    for (int k = 0; k < info->dlpi_phnum; ++k) {
      const ElfW(Phdr)& l = info->dlpi_phdr[k];
      const uint64_t lo = info->dlpi_addr + l.p_vaddr;
      if (l.p_type == PT_LOAD && out->address >= lo && out->address < lo + l.p_memsz)
        out->limit = lo + l.p_memsz;
    }
    return 1;
  }
  return 0;
}

// The copy described through the C API, as a C JIT would (code.S: push rbx ends at 1, push r12
// at 3, sub rsp at 7, add rsp at 18, pop r12 at 20, pop rbx at 21, ret at 22). `drop`: without
// the save_register/restore_register directives. Returns its address, or 0.
uint64_t publish_with_c_api(uint64_t template_address, uint32_t size, bool drop) {
  jitunwind_error err;
  jitunwind_session_options so;
  jitunwind_session_options_init(&so);
  so.publishers = JITUNWIND_PUBLISH_GDB;
  jitunwind_session* s = nullptr;
  jitunwind_window* w = nullptr;
  jitunwind_frame_builder* b = nullptr;
  uint64_t address = 0;
  void* writable = nullptr;
  jitunwind_function f{};
  if (size != 22 || jitunwind_session_create(&so, &s, &err) != JITUNWIND_OK ||
      jitunwind_session_create_owned_window(s, nullptr, &w, &err) != JITUNWIND_OK ||
      jitunwind_window_allocate(w, size, 16, &address, &writable, &err) != JITUNWIND_OK ||
      jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) != JITUNWIND_OK) {
    std::fprintf(stderr, "savedregs: C API (size %u): %s\n", size, err.message);
    return 0;
  }
  std::memcpy(writable, reinterpret_cast<const void*>(template_address), size);
  jitunwind_frame_stack_alloc(b, 1, 8);
  if (!drop) jitunwind_frame_save_register(b, 1, 3, -16);
  jitunwind_frame_stack_alloc(b, 3, 8);
  if (!drop) jitunwind_frame_save_register(b, 3, 12, -24);
  jitunwind_frame_stack_alloc(b, 7, 8);
  jitunwind_frame_stack_free(b, 18, 8);
  jitunwind_frame_stack_free(b, 20, 8);
  if (!drop) jitunwind_frame_restore_register(b, 20, 12);
  jitunwind_frame_stack_free(b, 21, 8);
  if (!drop) jitunwind_frame_restore_register(b, 21, 3);
  const bool ok = jitunwind_frame_builder_finish(b, address, size, &f, &err) == JITUNWIND_OK &&
                  jitunwind_window_append(w, "jit_saves_rbx_c", &f, 0, &err) == JITUNWIND_OK &&
                  jitunwind_window_publish(w, &err) == JITUNWIND_OK;
  jitunwind_frame_builder_destroy(b);
  if (!ok) {
    std::fprintf(stderr, "savedregs: C API: %s\n", err.message);
    return 0;
  }
  std::printf("jit_saves_rbx_c at 0x%llx: %zu rows, %zu saved-register changes\n",
              static_cast<unsigned long long>(address), f.row_count, f.saved_register_count);
  return address;  // the session stays: the code runs until the process ends
}

}  // namespace

// --drop-saved-registers publishes the rows without the saved registers (what jitunwind did
// before they were kept): gdb then shows the JIT code's rbx (0) in the caller's frame.
int main(int argc, char** argv) {
  const bool drop = argc > 1 && std::strcmp(argv[1], "--drop-saved-registers") == 0;
  eh_frame_location where;
  dl_iterate_phdr(find_eh_frame, &where);
  if (where.address == 0 || where.limit <= where.address) {
    std::fprintf(stderr, "savedregs: no .eh_frame found\n");
    return 1;
  }
  jitunwind::cfi::decoder_options o;
  o.section_address = where.address;
  auto d = jitunwind::cfi::decode(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(where.address),
                               where.limit - where.address),
      o);
  if (!d) {
    std::fprintf(stderr, "savedregs: %s\n", d.error().message().c_str());
    return 1;
  }
  const auto template_address = reinterpret_cast<uint64_t>(&jit_template);
  const jitunwind::function_desc* rows = nullptr;
  for (const auto& f : d->functions)
    if (f.start == template_address) rows = &f;
  if (rows == nullptr) {
    std::fprintf(stderr, "savedregs: no FDE for jit_template\n");
    return 1;
  }

  jitunwind::session_options so;
  so.publishers = static_cast<jitunwind::publisher_set>(jitunwind::publisher::gdb);
  auto s = jitunwind::session::create(so);
  if (!s) return 1;
  auto w = (*s)->create_owned_window({});
  if (!w) return 1;
  auto space = (*w)->allocate(rows->size);
  if (!space) return 1;
  std::memcpy(space->writable.data(), reinterpret_cast<const void*>(template_address), rows->size);
  jitunwind::function_desc copy = *rows;
  copy.start = space->address;
  if (drop) copy.saved_registers.clear();
  if (auto a = (*w)->append("jit_saves_rbx", copy); !a) {
    std::fprintf(stderr, "savedregs: %s\n", a.error().message().c_str());
    return 1;
  }
  if (!(*w)->publish()) return 1;
  std::printf("jit_saves_rbx at 0x%llx: %zu rows, %zu saved-register changes\n",
              static_cast<unsigned long long>(copy.start), copy.rows.size(),
              copy.saved_registers.size());
  const uint64_t c_copy = publish_with_c_api(template_address, rows->size, drop);
  if (c_copy == 0) return 1;
  const uint64_t rbx = call_with_rbx(copy.start, native_breakpoint);
  const uint64_t c_rbx = call_with_rbx(c_copy, native_breakpoint);
  std::printf("rbx after the calls: 0x%llx, 0x%llx\n", static_cast<unsigned long long>(rbx),
              static_cast<unsigned long long>(c_rbx));
  return rbx == 0x1122334455667788ull && c_rbx == rbx ? 0 : 1;
}
