// Runs real programs (perf, gdb, bpftrace, llvm-readobj, the project's binaries) from tests.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace jitunwind::test {

struct run_result {
  int exit_code = -1;  ///< exit status, or 128 + signal number
  bool timed_out = false;
  std::string out;       ///< standard output
  std::string err;       ///< standard error
  double seconds = 0;    ///< from the start to the end of the program
  long max_rss_kib = 0;  ///< the program's peak resident memory (getrusage ru_maxrss)
};

/// Runs argv[0] (looked up on PATH) with the arguments, optional standard input, and a timeout
/// after which the child is killed with SIGKILL.
run_result run(const std::vector<std::string>& argv, const std::string& input = {},
               std::chrono::milliseconds timeout = std::chrono::seconds(120));

/// Runs a shell command line with /bin/sh -c.
run_result run_shell(const std::string& command,
                     std::chrono::milliseconds timeout = std::chrono::seconds(120));

/// A fresh directory under /tmp removed (recursively) when the object dies.
class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// Reads a whole file; empty if it cannot be read.
std::string read_file(const std::string& path);
/// Writes a whole file (binary); false on failure.
bool write_file(const std::string& path, const std::string& data);

/// Path of a file in the source tree / build tree.
std::string source_path(const std::string& relative);
std::string binary_path(const std::string& relative);

/// The pid a command printed as "pid N" (the tests' shells do `echo pid $$; exec ...`), or -1.
int printed_pid(const std::string& out);

}  // namespace jitunwind::test
