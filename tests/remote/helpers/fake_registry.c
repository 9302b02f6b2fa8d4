/* A process that is not the SDK but exports a `jitunwind_registry` of a future ABI version (or
   with a corrupt header): the reader must refuse it with a clear error. Usage:
   fake_registry VERSION [MAGIC]. Prints "ready", exits on stdin EOF. */
#include <jitunwind/jitunwind.h> /* must compile as C */
#include <jitunwind/registry_abi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((visibility("default"), used)) jitunwind_registry_header jitunwind_registry = {
    {'J', 'I', 'T', 'U', 'N', 'W', 'R', 'G'}, 1, 64, 64, 16, 0, 0, 0, 0, 0};

int main(int argc, char** argv) {
  if (argc > 1) jitunwind_registry.version = (uint32_t)atoi(argv[1]);
  if (argc > 2) memcpy(jitunwind_registry.magic, argv[2], strlen(argv[2]) < 8 ? strlen(argv[2]) : 8);
  printf("ready\n");
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}
