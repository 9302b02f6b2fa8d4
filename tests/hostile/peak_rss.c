/* peak_rss FILE LIMIT COMMAND [ARGS...]: runs COMMAND with its address space limited to LIMIT
 * bytes (setrlimit RLIMIT_AS, as `prlimit --as` does), writes "PEAK_KIB CPU_SECONDS" (its peak
 * resident memory and its user + system time, from wait4) to FILE and exits with its status
 * (128 + N if signal N ended it).
 *
 * The tests measure through this small process because a program started by a large one (the
 * test itself) reports, in ru_maxrss, the larger of its own peak and its parent's memory at
 * fork: the kernel keeps the high-water mark of the memory the process had before exec. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: peak_rss FILE LIMIT COMMAND [ARGS...]\n");
    return 2;
  }
  const pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    const rlim_t limit = strtoull(argv[2], NULL, 10);
    const struct rlimit rl = {limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(125);
    execvp(argv[3], argv + 3);
    perror(argv[3]);
    _exit(127);
  }
  int status = 0;
  struct rusage usage;
  while (wait4(pid, &status, 0, &usage) < 0) {
  }
  FILE* out = fopen(argv[1], "w");
  if (out != NULL) {
    const double cpu = (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    fprintf(out, "%ld %.3f\n", usage.ru_maxrss, cpu);
    fclose(out);
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
