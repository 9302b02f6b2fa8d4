/* An outside runtime written in C11: it places machine code with mmap, names it with the one-call
   on-ramp (jitunwind_name_code, rows from the C frame builder) and runs it. Built against the
   installed package (find_package and pkg-config) with -std=c11 -pedantic. Usage: embed_c
   [SECONDS]: with SECONDS, it keeps calling the JIT function that long (for perf and jitwalk). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#define _POSIX_C_SOURCE 200809L
#include <jitunwind/c/embed.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* push rbp; mov rbp, rsp; mov ecx, 1 << 20; 1: dec ecx; jnz 1b; mov eax, 42; pop rbp; ret */
static const unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0xb9, 0x00, 0x00, 0x10, 0x00, 0xff,
                                     0xc9, 0x75, 0xfc, 0xb8, 0x2a, 0x00, 0x00, 0x00, 0x5d, 0xc3};

static int fail(const char* what, const jitunwind_error* e) {
  fprintf(stderr, "embed_c: %s: %s\n", what, e->message);
  return 1;
}

/* The process's CPU time: a profile of N seconds gets its samples however busy the machine. */
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A native caller between main and the JIT code, kept out of line so profiles show it. */
__attribute__((noinline)) static int run_jit(int (*fn)(void)) {
  return fn();
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 0;
  jitunwind_error err;
  jitunwind_frame_builder* b = NULL;
  jitunwind_function f;
  void* mem;
  int (*fn)(void);
  double end;
  int value;

  printf("embed_c: jitunwind %s\n", jitunwind_version_string());
  mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return perror("mmap"), 1;
  memcpy(mem, code, sizeof code);
  if (mprotect(mem, 4096, PROT_READ | PROT_EXEC) != 0) return perror("mprotect"), 1;

  if (jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) != JITUNWIND_OK)
    return fail("builder", &err);
  jitunwind_frame_push_frame_pointer(b, 1, 4);
  jitunwind_frame_pop_frame_pointer(b, 19);
  if (jitunwind_frame_builder_finish(b, (uint64_t)(uintptr_t)mem, sizeof code, &f, &err) !=
      JITUNWIND_OK)
    return fail("rows", &err);
  if (jitunwind_name_code(mem, sizeof code, "embed_c:spin", f.rows, f.row_count, &err) !=
      JITUNWIND_OK)
    return fail("name_code", &err);
  jitunwind_frame_builder_destroy(b);

  memcpy(&fn, &mem, sizeof fn); /* ISO C has no object-to-function pointer cast */
  end = now() + seconds;
  do value = run_jit(fn);
  while (value == 42 && now() < end);
  if (jitunwind_forget_code(mem, &err) != JITUNWIND_OK) return fail("forget_code", &err);
  printf("embed_c: answer %d\n", value);
  return value == 42 ? 0 : 1;
}
