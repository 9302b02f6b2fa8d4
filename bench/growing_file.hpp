// A file that benchmarks append to (the floors of the file publishers, jitdump layouts): opened
// O_APPEND in a scratch directory, truncated outside the timing every 256 MiB so that a run does
// not fill the disk — the cost per byte of growing a file is the same either way — and removed
// at the end.
#pragma once

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

class growing_file {
 public:
  explicit growing_file(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) std::abort();
  }
  ~growing_file() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  growing_file(const growing_file&) = delete;
  growing_file& operator=(const growing_file&) = delete;

  int fd() const { return fd_; }
  /// After a write of `bytes`: truncates the file (untimed) once 256 MiB have been written.
  void grew(benchmark::State& state, size_t bytes) {
    written_ += bytes;
    if (written_ < (size_t{256} << 20)) return;
    state.PauseTiming();
    if (::ftruncate(fd_, 0) != 0) std::abort();
    written_ = 0;
    state.ResumeTiming();
  }

 private:
  std::string path_;
  int fd_ = -1;
  size_t written_ = 0;
};
