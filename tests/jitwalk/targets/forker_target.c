// A process tree for jitwalk's process tests (process_tree_test.cpp). Built without frame
// pointers: the walks of its children reach the root only through the tables of their
// address space. Modes:
//   forker SECONDS          forks two workers (worker_a, worker_b) that spin for SECONDS of CPU
//                           time while the parent spins in parent_work, then reaps them
//   solo SECONDS            one process: solo_middle -> solo_leaf spin (the exec'd program of a
//                           `sh -c` wrapper)
//   late FILE SECONDS       waits (sleeping) until FILE exists, then forks a worker (late_child)
//                           that spins for SECONDS; exits when it is reaped (bounded: 60 s)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long sink;

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void spin(double seconds) {
  const double end = cpu_now() + seconds;
  while (cpu_now() < end) {
    for (int i = 0; i < 20000; i++) sink += (unsigned long)i;
  }
}

__attribute__((noinline)) void worker_a(double s) {
  spin(s);
  sink++;
}
__attribute__((noinline)) void worker_b(double s) {
  spin(s);
  sink++;
}
__attribute__((noinline)) void parent_work(double s) {
  spin(s);
  sink++;
}
__attribute__((noinline)) void solo_leaf(double s) {
  spin(s);
  sink++;
}
__attribute__((noinline)) void solo_middle(double s) {
  solo_leaf(s);
  sink++;
}
__attribute__((noinline)) void late_child(double s) {
  spin(s);
  sink++;
}

__attribute__((noinline)) static pid_t fork_worker(void (*work)(double), double s) {
  pid_t p = fork();
  if (p < 0) {
    perror("fork");
    exit(1);
  }
  if (p == 0) {
    work(s);
    _exit(0);
  }
  return p;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "forker") == 0) {
    const double s = atof(argv[2]);
    pid_t a = fork_worker(worker_a, s), b = fork_worker(worker_b, s);
    parent_work(s);
    waitpid(a, NULL, 0);
    waitpid(b, NULL, 0);
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "solo") == 0) {
    solo_middle(atof(argv[2]));
    return 0;
  }
  if (argc == 4 && strcmp(argv[1], "late") == 0) {
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    for (int i = 0; i < 6000 && access(argv[2], F_OK) != 0; i++) usleep(10000);
    pid_t c = fork_worker(late_child, atof(argv[3]));
    waitpid(c, NULL, 0);
    return 0;
  }
  fprintf(stderr, "usage: %s forker SECONDS | solo SECONDS | late FILE SECONDS\n", argv[0]);
  return 2;
}
