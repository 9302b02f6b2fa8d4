/* A multi-threaded JIT for `jitunwind unwind check --skip-native` on machines whose debug
   registers do not trap, where the native call is run to its return with an int3 on the return
   address, in memory that every thread and every forked child sees.

   One JIT function, j(x) = work(x): push rbp; mov rbp, rsp; mov rax, work; call rax; pop rbp;
   ret. The main thread publishes it and calls it first (so it is the thread checked: the first
   to enter JIT code), then starts the other threads and calls it ROUNDS more times. In each of
   those calls work() waits until another thread has made a whole call of j meanwhile, through
   the same return address; in every fourth, also until the spawner has made a whole cycle:
   - two callers call j in a loop and check its results; the first also counts the real-time
     signals the spawner sends it (they queue: each one must arrive);
   - the spawner, per cycle: a short-lived thread that calls j, a fork whose child calls j, a
     clone(CLONE_VM | CLONE_VFORK) child (sharing the memory) that calls j, one signal.
   Exit status 0 when every result is right and every signal arrived; the number of the check
   that failed otherwise. Usage: threaded_jit ROUNDS */
#define _GNU_SOURCE
#include <jitunwind/jitunwind.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long (*jit)(long);
static pid_t main_tid;
static atomic_long done[2]; /* calls of j each caller completed */
static atomic_long cycles;  /* the spawner's whole cycles */
static atomic_int stop_spawner, stop_callers, failed;
static atomic_int main_waiting; /* the others pause between calls only while it is 0 */
static atomic_long signals_sent, signals_received;
static pthread_t first_caller;

static void fail(int check) {
  int expected = 0;
  atomic_compare_exchange_strong(&failed, &expected, check);
}

/* The native function j calls. On the main thread, once the others run: returns only after
   another thread has met the same return address meanwhile (a caller's second completed call
   began after this call began). */
static atomic_int rendezvous;

__attribute__((noinline)) long work(long x) {
  long r = 0;
  for (long i = 0; i < 8; ++i) r += x + i; /* 8x + 28 */
  if (atomic_load(&rendezvous) && gettid() == main_tid) {
    const long d0 = atomic_load(&done[0]), d1 = atomic_load(&done[1]);
    const long c0 = atomic_load(&cycles);
    const int whole_cycle = x % 4 == 0;
    atomic_store(&main_waiting, 1);
    while (atomic_load(&done[0]) < d0 + 2 && atomic_load(&done[1]) < d1 + 2) sched_yield();
    while (whole_cycle && atomic_load(&cycles) < c0 + 2) sched_yield();
    atomic_store(&main_waiting, 0);
  }
  return r;
}

static int right(long x, long r) {
  return r == 8 * x + 28;
}

/* Not to take the CPU from everything else while the main thread is single-stepped. */
static void pause_unless_main_waits(long microseconds) {
  const struct timespec t = {0, microseconds * 1000};
  if (!atomic_load(&main_waiting)) nanosleep(&t, NULL);
}

static void on_signal(int sig) {
  (void)sig;
  atomic_fetch_add(&signals_received, 1);
}

static void* caller(void* arg) {
  const long k = (long)(intptr_t)arg;
  for (long i = 1; !atomic_load(&stop_callers); ++i) {
    if (!right(i, jit(i))) fail(10);
    atomic_fetch_add(&done[k], 1);
    pause_unless_main_waits(100);
  }
  /* Queued signals arrive at the thread's next return to user mode: before it ends. */
  for (long i = 0; i < 100000000 && atomic_load(&signals_received) < atomic_load(&signals_sent);
       ++i)
    sched_yield();
  return NULL;
}

static void* short_lived(void* unused) {
  (void)unused;
  for (long i = 1; i <= 3; ++i)
    if (!right(i, jit(i))) fail(11);
  return NULL;
}

static int in_child(void* unused) {
  (void)unused;
  long ok = 1;
  for (long i = 1; i <= 3; ++i) ok &= right(i, jit(i));
  _exit(ok ? 0 : 1);
}

static int child_ended_well(pid_t child) {
  int st = 0;
  return child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void* spawner(void* unused) {
  (void)unused;
  static char stack[64 * 1024] __attribute__((aligned(16)));
  while (!atomic_load(&stop_spawner)) {
    pthread_t t;
    if (pthread_create(&t, NULL, short_lived, NULL) != 0 || pthread_join(t, NULL) != 0) fail(20);
    const pid_t forked = fork();
    if (forked == 0) in_child(NULL);
    if (!child_ended_well(forked)) fail(21); /* killed by a SIGTRAP left in its copy? */
    const pid_t shared =
        clone(in_child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
    if (!child_ended_well(shared)) fail(22);
    atomic_fetch_add(&signals_sent, 1);
    union sigval v = {0};
    if (pthread_sigqueue(first_caller, SIGRTMIN, v) != 0) fail(23);
    atomic_fetch_add(&cycles, 1);
    pause_unless_main_waits(1000);
  }
  return NULL;
}

/* j, published through the SDK's C API (registry only: nothing is written to files). */
static int publish(void) {
  /* push rbp; mov rbp, rsp; mov rax, imm64; call rax; pop rbp; ret */
  unsigned char code[18] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0xb8};
  const uint64_t target = (uint64_t)(uintptr_t)&work;
  memcpy(code + 6, &target, 8);
  code[14] = 0xff, code[15] = 0xd0, code[16] = 0x5d, code[17] = 0xc3;
  jitunwind_error err;
  jitunwind_session_options o;
  jitunwind_owned_window_options wo;
  jitunwind_session_options_init(&o);
  o.publishers = JITUNWIND_PUBLISH_REGISTRY;
  jitunwind_owned_window_options_init(&wo);
  wo.code_capacity = 4096;
  jitunwind_session* s = NULL;
  jitunwind_window* w = NULL;
  jitunwind_frame_builder* b = NULL;
  jitunwind_function f;
  uint64_t address = 0;
  void* writable = NULL;
  if (jitunwind_session_create(&o, &s, &err) != JITUNWIND_OK ||
      jitunwind_session_create_owned_window(s, &wo, &w, &err) != JITUNWIND_OK ||
      jitunwind_window_allocate(w, sizeof code, 16, &address, &writable, &err) != JITUNWIND_OK ||
      (memcpy(writable, code, sizeof code), 0) ||
      jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) != JITUNWIND_OK ||
      jitunwind_frame_push_frame_pointer(b, 1, 4) != JITUNWIND_OK ||
      jitunwind_frame_pop_frame_pointer(b, 17) != JITUNWIND_OK ||
      jitunwind_frame_builder_finish(b, address, sizeof code, &f, &err) != JITUNWIND_OK ||
      jitunwind_window_append(w, "threaded:j", &f, 0, &err) != JITUNWIND_OK ||
      jitunwind_window_publish(w, &err) != JITUNWIND_OK) {
    fprintf(stderr, "threaded_jit: %s\n", err.message);
    return 0;
  }
  memcpy(&jit, &address, sizeof jit);
  return 1; /* the session stays alive: its code runs until the end */
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: threaded_jit ROUNDS\n");
    return 2;
  }
  const long rounds = atol(argv[1]);
  main_tid = gettid();
  signal(SIGRTMIN, on_signal);
  if (!publish()) return 3;
  if (!right(1, jit(1))) return 4; /* the first entry into JIT code: this thread is checked */
  pthread_t callers[2], spawn;
  for (long k = 0; k < 2; ++k)
    if (pthread_create(&callers[k], NULL, caller, (void*)(intptr_t)k) != 0) return 5;
  first_caller = callers[0];
  if (pthread_create(&spawn, NULL, spawner, NULL) != 0) return 5;
  atomic_store(&rendezvous, 1);
  for (long x = 1; x <= rounds; ++x)
    if (!right(x, jit(x))) return 6;
  atomic_store(&stop_spawner, 1);
  pthread_join(spawn, NULL);
  atomic_store(&stop_callers, 1);
  for (int k = 0; k < 2; ++k) pthread_join(callers[k], NULL);
  if (atomic_load(&signals_received) != atomic_load(&signals_sent)) fail(30);
  printf(
      "threaded_jit: %ld rounds; callers %ld and %ld calls; %ld spawner cycles; %ld of %ld "
      "signals\n",
      rounds, atomic_load(&done[0]), atomic_load(&done[1]), atomic_load(&cycles),
      atomic_load(&signals_received), atomic_load(&signals_sent));
  return atomic_load(&failed);
}
