/* The on-ramp from C (jitunwind_name_code): a runtime that places its own code names it in one
   call. Compiled as C11 -pedantic; driven by onramp_test.cpp, which checks what profilers see. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, getpid under -std=c11 */
#include <jitunwind/jitunwind.h>

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "expect_c.h"

/* push rbp; mov rbp, rsp; mov eax, 42; pop rbp; ret */
static const unsigned char answer_code[] = {0x55, 0x48, 0x89, 0xe5, 0xb8, 42, 0, 0, 0, 0x5d, 0xc3};

/* Places the code, names it, runs it, checks the errors of the on-ramp; leaves the code named
   (for the caller to look at) and returns its address, or NULL with `msg`. */
void* capi_onramp_c_name(char* msg, size_t len) {
  jitunwind_error err;
  jitunwind_frame_builder* b = NULL;
  jitunwind_function f;
  jitunwind_session *s1 = NULL, *s2 = NULL;
  void* result = NULL;
  unsigned char* code =
      mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  msg[0] = '\0';
  EXPECT(code != MAP_FAILED, "mmap failed");
  memcpy(code, answer_code, sizeof answer_code);
  EXPECT(mprotect(code, 4096, PROT_READ | PROT_EXEC) == 0, "mprotect failed");

  EXPECT(jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) == JITUNWIND_OK, "%s",
         err.message);
  EXPECT(jitunwind_frame_push_frame_pointer(b, 1, 4) == JITUNWIND_OK, "push");
  EXPECT(jitunwind_frame_pop_frame_pointer(b, 10) == JITUNWIND_OK, "pop");
  EXPECT(jitunwind_frame_builder_finish(b, (uint64_t)(uintptr_t)code, sizeof answer_code, &f,
                                        &err) == JITUNWIND_OK,
         "finish: %s", err.message);

  /* The one call. */
  EXPECT(jitunwind_name_code(code, sizeof answer_code, "c:answer", f.rows, f.row_count, &err) ==
             JITUNWIND_OK,
         "name_code: %s", err.message);
  {
    int (*fn)(void);
    memcpy(&fn, &code, sizeof fn); /* object to function pointer, without a pedantic warning */
    EXPECT(fn() == 42, "the named code does not return 42");
  }

  /* Errors: named twice, no name, empty, rows NULL with a count, a bad row. */
  EXPECT(jitunwind_name_code(code, sizeof answer_code, "again", f.rows, f.row_count, &err) ==
             JITUNWIND_E_ALREADY_EXISTS,
         "naming twice: %s", err.message);
  EXPECT(jitunwind_name_code(code + 64, 16, NULL, NULL, 0, &err) == JITUNWIND_E_INVALID_ARGUMENT,
         "NULL name accepted");
  EXPECT(jitunwind_name_code(code + 64, 0, "empty", NULL, 0, &err) == JITUNWIND_E_INVALID_ARGUMENT,
         "empty range accepted");
  EXPECT(jitunwind_name_code(code + 64, 16, "rows", NULL, 2, &err) == JITUNWIND_E_INVALID_ARGUMENT,
         "NULL rows with a count accepted");
  EXPECT(jitunwind_forget_code(code + 64, &err) == JITUNWIND_E_NOT_FOUND,
         "forgetting code never named: %s", err.message);

  /* Named, forgotten, named again. */
  EXPECT(
      jitunwind_name_code(code + 64, 16, "norows", NULL, 0, &err) == JITUNWIND_E_INVALID_ARGUMENT,
      "no rows accepted");
  EXPECT(jitunwind_name_code(code + 64, 16, "c:scratch", f.rows, f.row_count, &err) == JITUNWIND_OK,
         "name_code: %s", err.message);
  EXPECT(jitunwind_forget_code(code + 64, &err) == JITUNWIND_OK, "forget: %s", err.message);
  EXPECT(jitunwind_forget_code(code + 64, &err) == JITUNWIND_E_NOT_FOUND, "forgotten twice");
  EXPECT(
      jitunwind_name_code(code + 64, 16, "c:scratch2", f.rows, f.row_count, &err) == JITUNWIND_OK,
      "naming again after forget: %s", err.message);

  /* The default session is one session. */
  EXPECT(jitunwind_default_session(&s1, &err) == JITUNWIND_OK && s1 != NULL, "default session");
  EXPECT(jitunwind_default_session(&s2, &err) == JITUNWIND_OK && s2 == s1, "two default sessions");
  result = code;
out:
  jitunwind_frame_builder_destroy(b);
  return result;
}
