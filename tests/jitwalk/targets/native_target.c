/* A native program for jitwalk's tests, built with -O2 -fomit-frame-pointer -Wa,--gsframe: no
 * frame pointers anywhere in its own code, only the .sframe section gas emits (SFrame v1 with
 * binutils 2.40). Usage: native_target [SECONDS] (default 2). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) long native_leaf(long x) {
  volatile long s = 0;
  for (long i = 0; i < x; i++) s += i * 3;
  return s;
}

__attribute__((noinline)) long native_middle(long x) {
  long r = native_leaf(x);
  return r + 1;
}

__attribute__((noinline)) long native_top(long x) {
  long r = native_middle(x) ^ 5;
  return r;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  double end = now() + seconds;
  long t = 0;
  while (now() < end) {
    for (int i = 0; i < 1000; i++) t += native_top(1000);
  }
  printf("native_target: %ld\n", t);
  return 0;
}
