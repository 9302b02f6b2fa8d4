// A process with the SDK linked in that publishes windows and waits: the target of the remote
// reader tests. Usage: registry_target WINDOWS. Prints "ready" when published, exits on stdin EOF.
// Window i: id 1000+i, text 0x100000*(i+1) size 0x1000+i, SFrame 0x7000000+0x100*i size 0x40+i,
// windows with odd i retired.
#include "registry/registry_writer.hpp"

#include <unistd.h>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  using namespace jitunwind::detail;
  const int count = argc > 1 ? std::atoi(argv[1]) : 0;
  for (int i = 0; i < count; ++i) {
    registry_window w;
    w.window_id = 1000 + static_cast<uint64_t>(i);
    w.text_start = 0x100000ull * static_cast<uint64_t>(i + 1);
    w.text_size = 0x1000 + static_cast<uint64_t>(i);
    w.sframe_address = 0x7000000 + 0x100ull * static_cast<uint64_t>(i);
    w.sframe_size = 0x40 + static_cast<uint64_t>(i);
    auto p = registry().add(w);
    if (!p) {
      std::fprintf(stderr, "add: %s\n", p.error().message().c_str());
      return 1;
    }
    if (i % 2 == 1 && !registry().retire(p->slot)) return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}
