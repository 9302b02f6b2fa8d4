// Reading another process's memory: the one primitive the remote registry reader needs, behind
// an interface so that the protocol can be tested and fuzzed on buffers.
#pragma once

#include <jitunwind/result.h>

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace jitunwind::remote::detail {

class memory_source {
 public:
  virtual ~memory_source() = default;
  /// Copies exactly `size` bytes at `address` into `out`. Each call is one copy that completes
  /// before the next call starts (the read protocol relies on that ordering).
  virtual result<void> read(uint64_t address, void* out, size_t size) const = 0;
  /// For error messages ("pid 1234").
  virtual pid_t pid() const = 0;
};

/// process_vm_readv on a live process.
class process_memory final : public memory_source {
 public:
  explicit process_memory(pid_t pid) : pid_(pid) {}
  result<void> read(uint64_t address, void* out, size_t size) const override;
  pid_t pid() const override { return pid_; }

 private:
  pid_t pid_;
};

}  // namespace jitunwind::remote::detail
