// An outside program using the installed SDK: only public headers, linked through the CMake
// package or pkg-config. It JIT-compiles one function into an owned window, publishes it (the
// in-process registry only, so it leaves no files behind), runs it, and reads the registry back
// the way an external unwinder would.
#include <jitunwind/frame.h>
#include <jitunwind/remote.h>
#include <jitunwind/window.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>

using namespace jitunwind;

template <class T>
static T must(result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "consumer: %s: %s\n", what, r.error().message().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

int main() {
  session_options options = must(session_options::from_env(), "options");
  options.publishers = static_cast<publisher_set>(publisher::registry);
  auto s = must(session::create(options), "session");
  window* w = must(s->create_owned_window({.code_capacity = 4096}), "window");

#if defined(__aarch64__)
  // stp x29, x30, [sp, #-16]!; mov x29, sp; mov w0, #42; ldp x29, x30, [sp], #16; ret
  const uint8_t code[] = {
      0xfd, 0x7b, 0xbf, 0xa9, 0xfd, 0x03, 0x00, 0x91, 0x40, 0x05, 0x80, 0x52, 0xfd, 0x7b, 0xc1,
      0xa8, 0xc0, 0x03, 0x5f, 0xd6};
  const uint32_t after_push = 4, after_set_fp = 8, after_pop = 16;
#else
  // push rbp; mov rbp, rsp; mov eax, 42; pop rbp; ret
  const uint8_t code[] = {0x55, 0x48, 0x89, 0xe5, 0xb8, 42, 0, 0, 0, 0x5d, 0xc3};
  const uint32_t after_push = 1, after_set_fp = 4, after_pop = 10;
#endif
  auto space = must(w->allocate(sizeof code), "allocate");
  std::memcpy(space.writable.data(), code, sizeof code);
  frame_builder b(native_abi);
  b.push_frame_pointer(after_push, after_set_fp).pop_frame_pointer(after_pop);
  auto rows = must(b.finish(space.address, sizeof code), "rows");
  if (auto r = w->append("answer", rows); !r) return std::fprintf(stderr, "%s\n", r.error().message().c_str()), 1;
  if (auto r = w->publish(); !r) return std::fprintf(stderr, "%s\n", r.error().message().c_str()), 1;

  const int value = reinterpret_cast<int (*)()>(space.address)();
  auto snapshot = must(remote::read_registry(getpid()), "read_registry");
  size_t live = 0;
  for (const auto& win : snapshot.windows) live += win.window_id == w->id();
  std::printf("consumer: %zu rows, answer %d, %zu live window(s) in the registry\n",
              rows.rows.size(), value, live);
  return rows.rows.size() == 4 && value == 42 && live == 1 ? 0 : 1;
}
