#include "trampolines/stub.hpp"

#include <jitunwind/trampolines.h>

#include "common/error.hpp"

namespace jitunwind::detail {

result<function_desc> stub_frames(uint64_t start) {
  // Rows of one stub: the frame-pointer prologue ends at 1 and 4, `pop rbp` at 7; the padding
  // after `ret` keeps the entry rules.
  frame_builder b(abi::amd64);
  b.push_frame_pointer(1, 4).pop_frame_pointer(7);
  return b.finish(start, trampoline_pool::stub_size);
}

result<function_desc> stub_array_frames(uint64_t start, uint32_t count) {
  auto block = stub_frames(0);
  if (!block) return block;
  function_desc f;
  f.start = start;
  f.size = trampoline_pool::stub_stride * count;
  f.rows = std::move(block->rows);
  f.pcmask_rep = trampoline_pool::stub_stride;
  if (auto r = validate(abi::amd64, f); !r) return std::move(r).error();
  return f;
}

}  // namespace jitunwind::detail
