/* An outside runtime written in strict C89 (-std=c89 -pedantic -Wall -Wextra -Werror): the
   installed headers compile without a warning, and the on-ramp names a function whose rows and
   callee-saved register come from the C frame builder (jitunwind_name_function). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <jitunwind/jitunwind.h>

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__aarch64__)
/* str x19, [sp, #-16]!; mov w0, #42; ldr x19, [sp], #16; ret */
static const unsigned char code[] = {0xf3, 0x0f, 0x1f, 0xf8, 0x40, 0x05, 0x80, 0x52,
                                     0xf3, 0x07, 0x41, 0xf8, 0xc0, 0x03, 0x5f, 0xd6};
#define CODE_ABI JITUNWIND_ABI_AARCH64_LE
#define SAVED_REG 19 /* x19 */
#define PUSHED 16
#define AFTER_PUSH 4
#define AFTER_POP 12
#else
/* push rbx; mov eax, 42; pop rbx; ret */
static const unsigned char code[] = {0x53, 0xb8, 0x2a, 0x00, 0x00, 0x00, 0x5b, 0xc3};
#define CODE_ABI JITUNWIND_ABI_AMD64
#define SAVED_REG 3 /* rbx */
#define PUSHED 8
#define AFTER_PUSH 1
#define AFTER_POP 7
#endif

static int fail(const char* what, const jitunwind_error* e) {
  fprintf(stderr, "embed_c89: %s: %s\n", what, e->message);
  return 1;
}

int main(void) {
  jitunwind_error err;
  jitunwind_frame_builder* b = NULL;
  jitunwind_function f;
  void* mem;
  int (*fn)(void);
  int value;

  mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return perror("mmap"), 1;
  memcpy(mem, code, sizeof code);
  if (mprotect(mem, 4096, PROT_READ | PROT_EXEC) != 0) return perror("mprotect"), 1;
  __builtin___clear_cache((char*)mem, (char*)mem + sizeof code); /* AArch64 */
  if (jitunwind_frame_builder_create(CODE_ABI, &b, &err) != JITUNWIND_OK)
    return fail("builder", &err);
  jitunwind_frame_stack_alloc(b, AFTER_PUSH, PUSHED);
  jitunwind_frame_save_register(b, AFTER_PUSH, SAVED_REG, -16); /* both: CFA-16 */
  jitunwind_frame_stack_free(b, AFTER_POP, PUSHED);
  jitunwind_frame_restore_register(b, AFTER_POP, SAVED_REG);
  if (jitunwind_frame_builder_finish(b, (uint64_t)(size_t)mem, sizeof code, &f, &err) !=
      JITUNWIND_OK)
    return fail("rows", &err);
  if (jitunwind_name_function("embed_c89:answer", &f, &err) != JITUNWIND_OK)
    return fail("name_function", &err);
  jitunwind_frame_builder_destroy(b);
  memcpy(&fn, &mem, sizeof fn);
  value = fn();
  if (jitunwind_forget_code(mem, &err) != JITUNWIND_OK) return fail("forget_code", &err);
  printf("embed_c89: jitunwind %s, answer %d\n", jitunwind_version_string(), value);
  return value == 42 ? 0 : 1;
}
