// A process that loads libjitunwind.so (dynamic link) and waits: the registry must be found in
// the shared library. Prints "ready", exits on stdin EOF.
#include <jitunwind/result.h>

#include <unistd.h>
#include <cstdio>

int main() {
  // Any exported function keeps the library a needed dependency.
  std::printf("ready %s\n", jitunwind::to_string(jitunwind::errc::ok));
  std::fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}
