#include "window/backends.hpp"

#include "common/error.hpp"

namespace jitunwind::detail {

result<std::unique_ptr<publisher_backend>> make_registry_backend(const session_options& o);
result<std::unique_ptr<publisher_backend>> make_usdt_events_backend(const session_options& o);
result<std::unique_ptr<publisher_backend>> make_kernel_publisher(const session_options& o);
result<std::unique_ptr<publisher_backend>> make_perfmap_backend(const session_options& o,
                                                                flusher* background);
result<std::unique_ptr<publisher_backend>> make_jitdump_backend(const session_options& o,
                                                                flusher* background);
result<std::unique_ptr<publisher_backend>> make_gdb_backend(const session_options& o);

result<std::unique_ptr<publisher_backend>> make_backend(publisher p, const session_options& o,
                                                        flusher* background) {
  switch (p) {
    case publisher::registry: return make_registry_backend(o);
    case publisher::usdt_events: return make_usdt_events_backend(o);
    case publisher::kernel: return make_kernel_publisher(o);
    case publisher::perfmap:
      return make_perfmap_backend(o, background);
    case publisher::jitdump:
      return make_jitdump_backend(o, background);
    case publisher::gdb: return make_gdb_backend(o);
  }
  return make_error(errc::invalid_argument, "unknown publisher %u", static_cast<unsigned>(p));
}

}  // namespace jitunwind::detail
