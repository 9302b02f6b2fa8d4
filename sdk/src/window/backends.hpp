// Private: creation of the publisher backends (one file per publisher in this folder).
#pragma once

#include "window/backend.hpp"

#include <memory>

namespace jitunwind::detail {

class flusher;

/// The backend of publisher `p`, or `unsupported`/another error saying why it cannot run.
/// `background`: the session's flusher for batched file publishers (null: none).
result<std::unique_ptr<publisher_backend>> make_backend(publisher p, const session_options& options,
                                                        flusher* background);

namespace kernel {
class syscall_layer;
}
/// The kernel publisher issuing its calls through `calls` (tests pass a fake kernel; the
/// session uses the real one). `calls` must outlive the publisher.
result<std::unique_ptr<publisher_backend>> make_kernel_publisher(const session_options& options,
                                                                 kernel::syscall_layer& calls);

}  // namespace jitunwind::detail
