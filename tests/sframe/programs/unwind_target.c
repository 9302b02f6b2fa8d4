/* A real call chain for the SFrame unwinder test. Built with -O2 -fomit-frame-pointer
   -Wa,--gsframe, so the only way to walk it is the .sframe section gas writes (v1 here).

   main -> big_frame (70000-byte frame) -> recurse x5 -> vla_frame (FP-based CFA)
        -> mid_frame (300-byte frame) -> spin (a leaf, interrupted by a profiling timer)

   Each function records __builtin_return_address(0) on entry; the signal handler (in the C++
   harness) captures the interrupted registers and copies the stack, and the harness then
   unwinds the copy with our unwinder and compares. */
#include <stdint.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

uintptr_t recorded[64];
int recorded_count;
volatile int spin_armed;
volatile int spin_done;

/* unwind_harness.cpp: loads our .sframe and arms the timer; then unwinds and compares. */
int harness_setup(void);
int harness_check(void);

#define RECORD() (recorded[recorded_count++] = (uintptr_t)__builtin_return_address(0))

NOINLINE int spin(int n) {
  RECORD();
  spin_armed = 1;
  while (!spin_done) {
  }
  spin_armed = 0;
  return n + 1;
}

NOINLINE int mid_frame(int n) {
  RECORD();
  volatile char buf[300];
  buf[n % 300] = (char)n;
  int r = spin(n);
  return r + buf[(n / 2) % 300];
}

/* The variable-length array makes gcc keep rbp as the frame base: an FP-based CFA. */
NOINLINE int vla_frame(int n) {
  RECORD();
  char buf[n + 16];
  memset(buf, n, sizeof buf);
  int r = mid_frame(n);
  return r + buf[n / 2];
}

/* Work after the call (storing into a stack array) keeps gcc from turning the recursion into
   a loop. */
NOINLINE int recurse(int depth, int n) {
  RECORD();
  volatile int keep[4];
  keep[depth & 3] = depth;
  int r = depth == 0 ? vla_frame(n) : recurse(depth - 1, n);
  keep[(depth + 1) & 3] = r;
  return keep[(depth + 1) & 3] + keep[depth & 3];
}

NOINLINE int big_frame(int n) {
  RECORD();
  volatile char buf[70000];
  buf[n] = (char)n;
  int r = recurse(4, n);
  return r + buf[n / 2];
}

int main(int argc, char** argv) {
  (void)argv;
  RECORD();
  if (harness_setup() != 0) return 2;
  int r = big_frame(argc + 7);
  return harness_check() + (r == 123456789);
}
