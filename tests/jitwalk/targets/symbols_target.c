/* A native program whose time goes where jitwalk must name frames that are not plain ELF
 * functions of a file: `vdso SECONDS` calls clock_gettime(CLOCK_MONOTONIC) in a loop (the
 * kernel's vDSO does the work), `plt SECONDS` calls labs through the PLT in a loop (built
 * without -fno-plt and with -fno-builtin, so every call goes through labs@plt; labs is a few
 * instructions, so the PLT's jump is a good part of the loop's time). SECONDS is the
 * thread's CPU time, so a profile at a fixed rate gets the same number of samples however loaded
 * the machine is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double thread_cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static long vdso_loop(double seconds) {
  long t = 0;
  struct timespec ts;
  while (thread_cpu_seconds() < seconds) {
    for (int i = 0; i < 20000; i++) {
      clock_gettime(CLOCK_MONOTONIC, &ts);
      t += ts.tv_nsec & 1;
    }
  }
  return t;
}

__attribute__((noinline)) static long plt_loop(double seconds) {
  long t = 0;
  while (thread_cpu_seconds() < seconds) {
    for (long i = -100000; i < 100000; i++) t += labs(i);
  }
  return t;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: symbols_target vdso|plt SECONDS\n");
    return 2;
  }
  const double seconds = atof(argv[2]);
  long t = strcmp(argv[1], "vdso") == 0 ? vdso_loop(seconds) : plt_loop(seconds);
  printf("symbols_target: %ld\n", t);
  return 0;
}
