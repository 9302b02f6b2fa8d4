/* A native program for jitwalk's tests, built with -O2 -fomit-frame-pointer -Wa,--gsframe: no
 * frame pointers anywhere in its own code, only the .sframe section gas emits (SFrame v1 with
 * binutils 2.40). Usage: native_target [SECONDS [THREADS]] (default 2 s, 1 thread: main alone;
 * more threads run the same loop from native_thread). SECONDS is CPU time of each thread, not
 * wall-clock time: a profile at a fixed rate then gets the same number of samples however loaded
 * the machine is. */
#include <pthread.h>
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

static double thread_cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double g_seconds;

static long spin(void) {
  long t = 0;
  while (thread_cpu_seconds() < g_seconds) {
    for (int i = 0; i < 1000; i++) t += native_top(1000);
  }
  return t;
}

__attribute__((noinline)) static void* native_thread(void* arg) {
  *(long*)arg = spin();
  return NULL;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  g_seconds = seconds;
  pthread_t tid[64];
  long result[64] = {0};
  for (int i = 1; i < threads; i++) pthread_create(&tid[i], NULL, native_thread, &result[i]);
  long t = spin();
  for (int i = 1; i < threads; i++) {
    pthread_join(tid[i], NULL);
    t += result[i];
  }
  printf("native_target: %ld\n", t);
  return 0;
}
