// Uses only installed public headers.
#include <jitunwind/frame.h>

#include <cstdio>

int main() {
  jitunwind::frame_builder b(jitunwind::abi::amd64);
  b.push_frame_pointer(1, 4).pop_frame_pointer(9);
  auto f = b.finish(0x1000, 10);
  if (!f.ok()) {
    std::fprintf(stderr, "consumer: %s\n", f.error().message().c_str());
    return 1;
  }
  std::printf("consumer: %zu rows\n", f->rows.size());
  return f->rows.size() == 4 ? 0 : 1;
}
