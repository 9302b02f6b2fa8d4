// Private: the x86-64 trampoline stub and the rows that describe an array of them.
#pragma once

#include <jitunwind/frame.h>
#include <jitunwind/result.h>

#include <array>
#include <cstdint>

namespace jitunwind::detail {

/// push rbp; mov rbp, rsp; call rcx; pop rbp; ret; int3 x 8 (see trampolines.h).
inline constexpr std::array<uint8_t, 16> amd64_stub = {
    0x55,              // push rbp
    0x48, 0x89, 0xe5,  // mov rbp, rsp
    0xff, 0xd1,        // call rcx
    0x5d,              // pop rbp
    0xc3,              // ret
    0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
};

/// One PCMASK function covering `count` stubs starting at `start`.
result<function_desc> stub_array_frames(uint64_t start, uint32_t count);

/// One stub at `start` described on its own (for the naming publishers).
result<function_desc> stub_frames(uint64_t start);

}  // namespace jitunwind::detail
