#include "runtime.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace toylang {

void runtime_error(const std::string& file, uint32_t line, uint32_t column,
                   const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s:%u:%u: runtime error: %s\n", file.c_str(), line, column,
               message.c_str());
  std::exit(3);
}

uint64_t native_stack_limit(size_t margin) {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void* base = nullptr;
  size_t size = 0;
  const int rc = pthread_attr_getstack(&attr, &base, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0) return 0;
  // A stack smaller than twice the margin (ulimit -s 256, say) keeps half of itself for toy
  // code: giving up the check there would turn deep recursion into a segfault.
  return reinterpret_cast<uint64_t>(base) + std::min(margin, size / 2);
}

}  // namespace toylang
