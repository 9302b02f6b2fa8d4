// An outside runtime written in C++ (compiled as C++17 and as C++20): an owned window of a
// session configured from the environment, rows from frame_builder, append, publish, run.
// Usage: embed_cxx [SECONDS]: with SECONDS, it keeps calling the JIT function that long.
#include <jitunwind/frame.h>
#include <jitunwind/jitunwind.h>
#include <jitunwind/window.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

using namespace jitunwind;

// push rbp; mov rbp, rsp; mov ecx, 1 << 20; 1: dec ecx; jnz 1b; mov eax, 42; pop rbp; ret
static const uint8_t code[] = {0x55, 0x48, 0x89, 0xe5, 0xb9, 0x00, 0x00, 0x10, 0x00,
                               0xff, 0xc9, 0x75, 0xfc, 0xb8, 0x2a, 0x00, 0x00, 0x00, 0x5d, 0xc3};

template <class T>
static T must(result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "embed_cxx: %s: %s\n", what, r.error().message().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

static void must(result<void> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "embed_cxx: %s: %s\n", what, r.error().message().c_str());
    std::exit(1);
  }
}

// A native caller between main and the JIT code, kept out of line so profiles show it.
__attribute__((noinline)) static int run_jit(int (*fn)()) { return fn(); }

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0;
  std::printf("embed_cxx: C++%ld, jitunwind %s\n", __cplusplus / 100 % 100,
              jitunwind_version_string());
  auto s = must(session::create(must(session_options::from_env(), "options")), "session");
  owned_window_options wo;
  wo.code_capacity = 4096;
  window* w = must(s->create_owned_window(wo), "window");
  auto space = must(w->allocate(sizeof code), "allocate");
  std::memcpy(space.writable.data(), code, sizeof code);
  frame_builder b(abi::amd64);
  b.push_frame_pointer(1, 4).pop_frame_pointer(19);
  must(w->append("embed_cxx:spin", must(b.finish(space.address, sizeof code), "rows")), "append");
  must(w->publish(), "publish");

  const auto fn = reinterpret_cast<int (*)()>(space.address);
  // Seconds of the process's CPU time: a profile gets its samples however busy the machine.
  const std::clock_t end = std::clock() + static_cast<std::clock_t>(seconds * CLOCKS_PER_SEC);
  int value;
  do value = run_jit(fn);
  while (value == 42 && std::clock() < end);
  std::printf("embed_cxx: answer %d\n", value);
  return value == 42 ? 0 : 1;
}
