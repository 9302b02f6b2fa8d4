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

}  // namespace jitunwind::detail
