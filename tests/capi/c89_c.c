/* The C API from strict C89 (compiled with -std=c89 -pedantic -Wall -Wextra -Werror): the
   headers must compile without a warning, and a C89 runtime can describe a function that saves
   callee-saved registers, publish it in an owned window and run it. Driven by c89_test.cpp. */
#include <jitunwind/jitunwind.h>

#include <string.h>

#ifdef JITUNWIND_USDT_FIRE
#error "JITUNWIND_USDT_FIRE is a variadic macro: C89 has none, c/usdt.h must not define it"
#endif

/* push rbx; push r12; sub rsp, 8; mov eax, 7; add rsp, 8; pop r12; pop rbx; ret */
static const unsigned char code[] = {0x53, 0x41, 0x54, 0x48, 0x83, 0xec, 0x08,
                                     0xb8, 0x07, 0x00, 0x00, 0x00, 0x48, 0x83,
                                     0xc4, 0x08, 0x41, 0x5c, 0x5b, 0xc3};

static int note(char* msg, size_t len, const char* what, const jitunwind_error* err) {
  strncpy(msg, what, len - 1);
  msg[len - 1] = '\0';
  if (err != NULL && strlen(msg) + 2 < len) {
    strcat(msg, ": ");
    strncat(msg, err->message, len - strlen(msg) - 1);
  }
  return 1;
}

/* The rows and saved registers of `code`, from the builder's directives. */
static int describe(jitunwind_frame_builder* b, uint64_t start, jitunwind_function* f,
                    jitunwind_error* err) {
  jitunwind_frame_stack_alloc(b, 1, 8);
  jitunwind_frame_save_register(b, 1, 3, -16); /* rbx */
  jitunwind_frame_stack_alloc(b, 3, 8);
  jitunwind_frame_save_register(b, 3, 12, -24); /* r12 */
  jitunwind_frame_stack_alloc(b, 7, 8);
  jitunwind_frame_remember_state(b);
  jitunwind_frame_stack_free(b, 16, 8);
  jitunwind_frame_stack_free(b, 18, 8);
  jitunwind_frame_restore_register(b, 18, 12);
  jitunwind_frame_stack_free(b, 19, 8);
  jitunwind_frame_restore_register(b, 19, 3);
  return jitunwind_frame_builder_finish(b, start, sizeof code, f, err);
}

/* Returns 0, or 1 with a message in `msg`. */
int capi_c89_scenario(char* msg, size_t len) {
  jitunwind_error err;
  jitunwind_frame_builder* b = NULL;
  jitunwind_function f;
  jitunwind_session_options so;
  jitunwind_owned_window_options wo;
  jitunwind_session* s = NULL;
  jitunwind_window* w = NULL;
  uint64_t address = 0;
  void* writable = NULL;
  int (*fn)(void);
  int rc = 1;

  msg[0] = '\0';
  jitunwind_session_options_init(&so);
  so.publishers = JITUNWIND_PUBLISH_REGISTRY;
  jitunwind_owned_window_options_init(&wo);
  wo.code_capacity = 4096;
  if (jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) != JITUNWIND_OK) {
    note(msg, len, "builder", &err);
    goto out;
  }
  if (jitunwind_session_create(&so, &s, &err) != JITUNWIND_OK ||
      jitunwind_session_create_owned_window(s, &wo, &w, &err) != JITUNWIND_OK ||
      jitunwind_window_allocate(w, sizeof code, 16, &address, &writable, &err) != JITUNWIND_OK) {
    note(msg, len, "window", &err);
    goto out;
  }
  memcpy(writable, code, sizeof code);
  if (describe(b, address, &f, &err) != JITUNWIND_OK) {
    note(msg, len, "rows", &err);
    goto out;
  }
  /* rbx saved at 1, r12 at 3, restored at 18 and 19 */
  if (f.saved_register_count != 4 || f.saved_registers[0].pc_offset != 1 ||
      f.saved_registers[0].dwarf_reg != 3 || f.saved_registers[0].rule != JITUNWIND_SAVED_AT_CFA ||
      f.saved_registers[0].cfa_offset != -16 ||
      f.saved_registers[3].rule != JITUNWIND_SAVED_UNCHANGED) {
    note(msg, len, "the builder's saved registers are not the directives'", NULL);
    goto out;
  }
  if (jitunwind_window_append(w, "c89:seven", &f, 0, &err) != JITUNWIND_OK ||
      jitunwind_window_publish(w, &err) != JITUNWIND_OK) {
    note(msg, len, "publish", &err);
    goto out;
  }
  memcpy(&fn, &address, sizeof fn); /* C has no object-to-function pointer conversion */
  if (fn() != 7) {
    note(msg, len, "the published code did not return 7", NULL);
    goto out;
  }
  rc = 0;
out:
  jitunwind_frame_builder_destroy(b);
  jitunwind_session_destroy(s);
  return rc;
}
