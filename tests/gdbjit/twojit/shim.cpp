// A shared library that embeds jitunwind's GDB JIT registrar the way libjitunwind.so does
// (hidden visibility, the descriptor symbols exported), loaded into a program that defines its
// own __jit_debug_descriptor (like a program with LLVM's ORC JIT linked in).
#include "gdbjit/gdbjit.hpp"

#include <cstdio>

using namespace jitunwind;
using namespace jitunwind::detail;

namespace {
std::unique_ptr<gdbjit::registrar> g_registrar;
}

extern "C" __attribute__((visibility("default"))) int shim_register(const char* name,
                                                                    uint64_t start, uint64_t size,
                                                                    const function_desc* frame,
                                                                    char* report,
                                                                    size_t report_len) {
  if (!g_registrar) {
    auto r = gdbjit::registrar::create({});
    if (!r) {
      std::snprintf(report, report_len, "error %s", r.error().message().c_str());
      return 1;
    }
    g_registrar = std::move(*r);
  }
  const gdbjit::descriptor_info& d = g_registrar->descriptor();
  std::snprintf(report, report_len, "policy=%s first=%s",
                d.policy == gdbjit::descriptor_policy::own ? "own" : "shared",
                d.first == d.ours        ? "ours"
                : d.first_object.empty() ? "main"
                                         : "other");
  const gdbjit::function_symbol f{name, start, size, frame};
  auto id = g_registrar->add(std::span(&f, 1));
  return id.ok() ? 0 : 2;
}
