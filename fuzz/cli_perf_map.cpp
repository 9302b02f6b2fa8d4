// libFuzzer target for the CLI's perf map reader (tools/jitunwind/proc_files.cpp), which reads a
// file any process can write. Any input must parse without a crash, and reading the file as it
// grows (a prefix, then the rest: what `jitunwind windows watch` does) must give exactly the
// names of reading it whole — a partial last line is left for later, never half-parsed.
//
// The tool's sources are compiled in directly (they are not part of the SDK library).
#include "../tools/jitunwind/cli.cpp"
#include "../tools/jitunwind/proc_files.cpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

namespace {

// A memfd holding `bytes`, readable by path through /proc/self/fd.
struct mem_file {
  int fd = memfd_create("perf-map", 0);
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void append(const uint8_t* data, size_t size) {
    while (size > 0) {
      const ssize_t n = write(fd, data, size);
      if (n <= 0) std::abort();
      data += n;
      size -= static_cast<size_t>(n);
    }
  }
  ~mem_file() { close(fd); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using jitunwind::cli::perf_map_names;
  if (size == 0) return 0;
  const size_t split = data[0] % size;  // where the file stands at the first read
  mem_file whole, growing;
  if (whole.fd < 0 || growing.fd < 0) std::abort();
  whole.append(data, size);
  perf_map_names at_once(whole.path);
  at_once.update();

  growing.append(data, split);
  perf_map_names in_steps(growing.path);
  in_steps.update();
  growing.append(data + split, size - split);
  in_steps.update();
  if (in_steps.names() != at_once.names()) std::abort();
  for (const auto& [start, name] : at_once.names()) (void)at_once.name_or_address(start);
  return 0;
}
