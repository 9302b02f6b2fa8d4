// Toolkit: how the tools create their output files (profiles, flame graphs, SFrame sections,
// ELF images, reports) when they may run as root and the path may lie in a directory others can
// write, such as /tmp. The policy (docs/cli.md and docs/jitwalk.md, "Reading hostile
// processes"):
//   - an existing PATH must be a regular file: a symbolic link there is refused, never followed
//     (with fs.protected_symlinks=0 a planted link would make root overwrite the file it points
//     to), and so are FIFOs, devices and directories;
//   - the output is written to a new file created beside PATH (O_CREAT|O_EXCL|O_NOFOLLOW, mode
//     0666 minus the umask) and renamed over PATH once complete: nothing is written through a
//     hard link either, a reader never sees half a file, and a failed run leaves PATH as it was;
//   - the directory is the one PATH names (its own symbolic links are the caller's choice).
#pragma once

#include <jitunwind/result.h>

#include <span>
#include <string>
#include <string_view>

namespace jitunwind::toolkit {

/// Writes `bytes` as the new contents of `path` under the policy above. `what` names the output
/// in messages ("folded stacks" gives "folded stacks PATH: is a symbolic link: ..."; empty:
/// "PATH: ..."). Errors: permission_denied (an existing symbolic link), io_error (not a regular
/// file, the directory cannot be written, a write failed), each naming PATH.
result<void> replace_file(const std::string& path, std::span<const uint8_t> bytes,
                          const char* what = "");
result<void> replace_file(const std::string& path, std::string_view text, const char* what = "");

/// What replace_file would refuse, found before a long run: PATH is absent or a regular file,
/// and a file can be created in its directory (one is created and removed at once; nothing is
/// left behind and an existing PATH is not touched).
result<void> check_output_path(const std::string& path, const char* what = "");

}  // namespace jitunwind::toolkit
