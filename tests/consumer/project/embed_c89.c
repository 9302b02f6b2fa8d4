/* An outside runtime written in strict C89 (-std=c89 -pedantic -Wall -Wextra -Werror): the
   installed headers compile without a warning, and the on-ramp names a function whose rows and
   callee-saved register come from the C frame builder (jitunwind_name_function). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <jitunwind/jitunwind.h>

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* push rbx; mov eax, 42; pop rbx; ret */
static const unsigned char code[] = {0x53, 0xb8, 0x2a, 0x00, 0x00, 0x00, 0x5b, 0xc3};

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
  if (jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) != JITUNWIND_OK)
    return fail("builder", &err);
  jitunwind_frame_stack_alloc(b, 1, 8);
  jitunwind_frame_save_register(b, 1, 3, -16); /* rbx */
  jitunwind_frame_stack_free(b, 7, 8);
  jitunwind_frame_restore_register(b, 7, 3);
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
