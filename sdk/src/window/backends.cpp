#include "window/backends.hpp"

#include "common/error.hpp"

namespace jitunwind::detail {

result<std::unique_ptr<publisher_backend>> make_backend(publisher p, const session_options&) {
  return make_error(errc::unsupported, "%s: not part of this build", to_string(p));
}

}  // namespace jitunwind::detail
