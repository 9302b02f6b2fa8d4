// Where a generated object lives while it is loaded: a memfd, or a file in a private runtime
// directory created without races.
#pragma once

#include <jitunwind/log.h>
#include <jitunwind/result.h>
#include <jitunwind/usdt.h>

#include <string>

namespace jitunwind::usdt::detail {

/// An object's home. Owns `fd` (kept open while loaded: bcc maps a /memfd: mapping back to
/// /proc/PID/fd/N) and, in file mode, the directory fd and file name to unlink.
class placed_object {
 public:
  placed_object() = default;
  placed_object(placed_object&& o) noexcept { *this = std::move(o); }
  placed_object& operator=(placed_object&& o) noexcept;
  ~placed_object() { remove(); }

  int fd() const { return fd_; }
  /// `/proc/PID/fd/N`: in memfd mode, what tracers open (it names exactly the inode we wrote,
  /// whatever happens to the directory).
  std::string fd_path() const;
  /// Tracers' path: the file's path in file mode, `fd_path()` for a memfd.
  const std::string& tracer_path() const { return tracer_path_; }
  bool is_file() const { return dir_fd_ >= 0; }

  /// Closes the fd and, in file mode, unlinks the file. Idempotent.
  void remove() noexcept;

  /// memfd "jitunwind-usdt:PROVIDER" (executable, sealable).
  static result<placed_object> create_memfd(const std::string& provider);
  /// A new file `jitunwind-usdt-PROVIDER-PID-STARTTIME-N.so` in the runtime directory.
  static result<placed_object> create_file(const std::string& provider,
                                           const provider_options& options);

  /// memfd: forbids any further change of the contents (F_SEAL_*).
  result<void> seal();

 private:
  int fd_ = -1;
  int dir_fd_ = -1;
  std::string file_name_;
  std::string tracer_path_;
  int owner_pid_ = 0;
};

/// Opens (creating it if needed) the runtime directory the options select and checks that it
/// is private. Returns its fd and path.
struct runtime_dir {
  int fd = -1;
  std::string path;
};
result<runtime_dir> open_runtime_dir(const provider_options& options);

/// Removes `jitunwind-usdt-*.so` files of processes that no longer exist (pid gone or start
/// time different) from the directory. Returns how many were removed.
size_t remove_stale_files(int dir_fd);

/// The start time of process `pid` in clock ticks since boot (field 22 of /proc/PID/stat),
/// 0 if unknown. Together with the pid it names a process uniquely.
unsigned long long process_start_time(int pid);

}  // namespace jitunwind::usdt::detail
