/// jitunwind/result.h — error values of the C++ API.
///
/// No function of the SDK throws. Fallible operations return `result<T>`: either a value or an
/// `error` (an `errc` plus a message that names what was wrong and where). Values are plain
/// objects; thread-safety is that of the contained type.
#pragma once

#include <jitunwind/config.h>

#include <cassert>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace jitunwind {

/// Error categories. The numeric values are part of the C ABI (`jitunwind_status` is `-errc`).
enum class errc : int {
  ok = 0,
  invalid_argument = 1,  ///< the caller passed something the API does not accept
  malformed = 2,         ///< foreign data (a section, a file, another process) is corrupt
  out_of_range = 3,      ///< an address, offset or count outside what is allowed
  unsupported = 4,       ///< the running system (kernel, tool, architecture) cannot do it
  io_error = 5,          ///< a system call on a file, mapping or process failed
  permission_denied = 6, ///< not allowed (ownership, privileges, unsafe path)
  not_found = 7,         ///< the thing looked for does not exist
  already_exists = 8,    ///< a name or range is already taken
  bad_state = 9,         ///< the object is not in a state that allows the operation
  no_memory = 10,        ///< an allocation or reservation failed
  limit_exceeded = 11,   ///< a fixed capacity (depth, size, count) would be exceeded
};

/// Stable lower-case name of an error category ("invalid_argument", …).
JITUNWIND_API const char* to_string(errc code) noexcept;

/// An error: category plus a human-readable message naming the offending structure and values.
class error {
 public:
  error(errc code, std::string message) : code_(code), message_(std::move(message)) {}
  errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }

 private:
  errc code_;
  std::string message_;
};

/// Either a `T` or an `error`. Accessing the wrong alternative is a programming error (asserted).
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  result(jitunwind::error e) : v_(std::in_place_index<1>, std::move(e)) {}      // NOLINT: implicit by design

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const jitunwind::error& error() const& { assert(!ok()); return std::get<1>(v_); }
  jitunwind::error&& error() && { assert(!ok()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, jitunwind::error> v_;
};

/// Success without a value, or an error.
template <>
class [[nodiscard]] result<void> {
 public:
  result() = default;
  result(jitunwind::error e) : e_(std::move(e)), has_error_(true) {}  // NOLINT: implicit by design

  bool ok() const noexcept { return !has_error_; }
  explicit operator bool() const noexcept { return ok(); }
  const jitunwind::error& error() const& { assert(!ok()); return e_; }
  jitunwind::error&& error() && { assert(!ok()); return std::move(e_); }

 private:
  jitunwind::error e_{errc::ok, {}};
  bool has_error_ = false;
};

/// Shorthand for `result<void>{}`.
inline result<void> ok_result() { return {}; }

}  // namespace jitunwind
