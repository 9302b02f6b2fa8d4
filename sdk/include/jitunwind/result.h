/// jitunwind/result.h — error values of the C++ API.
///
/// No function of the SDK throws. Fallible operations return `result<T>`: either a value or an
/// `error` (an `errc` plus a message that names what was wrong and where). Values are plain
/// objects; thread-safety is that of the contained type.
///
/// Reading the wrong alternative — `value()` (or `*`, `->`) of an error, `error()` of a success —
/// is a programming error with one defined outcome in every build type (Debug, Release, with or
/// without NDEBUG): the program writes what it tried and the error's category and message to
/// stderr and ends with std::abort(). It never throws and never returns garbage. Test `ok()`
/// first, or use `value_or` and `JITUNWIND_TRY` / `JITUNWIND_TRY_ASSIGN`.
///
/// C++17 and later.
#pragma once

#include <jitunwind/config.h>

#include <cstdio>
#include <cstdlib>
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

namespace detail {

/// The defined end of reading the wrong alternative of a `result` (see the top of this file).
[[noreturn]] inline void bad_result_access(const char* what, const error* e) noexcept {
  if (e != nullptr) {
    std::fprintf(stderr, "jitunwind: %s on an error result (%s: %s)\n", what, to_string(e->code()),
                 e->message().c_str());
  } else {
    std::fprintf(stderr, "jitunwind: %s on a successful result\n", what);
  }
  std::abort();
}

}  // namespace detail

/// Either a `T` or an `error`.
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  result(jitunwind::error e) : v_(std::in_place_index<1>, std::move(e)) {}  // NOLINT: implicit

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  /// The value; on an error: stderr + std::abort() in every build type.
  T& value() & { return *check_value(); }
  const T& value() const& { return *check_value(); }
  T&& value() && { return std::move(*check_value()); }
  T* operator->() { return check_value(); }
  const T* operator->() const { return check_value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  /// The value, or `fallback` converted to T on an error.
  template <class U>
  T value_or(U&& fallback) const& {
    return ok() ? *std::get_if<0>(&v_) : static_cast<T>(std::forward<U>(fallback));
  }
  template <class U>
  T value_or(U&& fallback) && {
    return ok() ? std::move(*std::get_if<0>(&v_)) : static_cast<T>(std::forward<U>(fallback));
  }

  /// The error; on a success: stderr + std::abort() in every build type.
  const jitunwind::error& error() const& { return *check_error(); }
  jitunwind::error&& error() && { return std::move(*check_error()); }

 private:
  T* check_value() {
    if (T* v = std::get_if<0>(&v_)) return v;
    detail::bad_result_access("result::value()", std::get_if<1>(&v_));
  }
  const T* check_value() const { return const_cast<result*>(this)->check_value(); }
  jitunwind::error* check_error() {
    if (auto* e = std::get_if<1>(&v_)) return e;
    detail::bad_result_access("result::error()", nullptr);
  }
  const jitunwind::error* check_error() const { return const_cast<result*>(this)->check_error(); }

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
  /// The error; on a success: stderr + std::abort() in every build type.
  const jitunwind::error& error() const& {
    if (!has_error_) detail::bad_result_access("result<void>::error()", nullptr);
    return e_;
  }
  jitunwind::error&& error() && {
    if (!has_error_) detail::bad_result_access("result<void>::error()", nullptr);
    return std::move(e_);
  }

 private:
  jitunwind::error e_{errc::ok, {}};
  bool has_error_ = false;
};

/// Shorthand for `result<void>{}`.
inline result<void> ok_result() { return {}; }

}  // namespace jitunwind

/// Propagation: in a function returning any `result<U>`, returns the error of `expr` (a
/// `result<T>`), else goes on (the value, if any, is dropped):
///   JITUNWIND_TRY(w->publish());
#define JITUNWIND_TRY(expr)                                                           \
  do {                                                                                \
    auto&& jitunwind_try_result_ = (expr);                                            \
    if (!jitunwind_try_result_.ok()) return std::move(jitunwind_try_result_).error(); \
  } while (0)

/// Propagation with the value: declares or assigns `lhs` from the value of `expr`, or returns
/// its error from the enclosing function (which returns any `result<U>`):
///   JITUNWIND_TRY_ASSIGN(jitunwind::window* w, s->create_owned_window({}));
/// One statement of the enclosing block (not for the body of an unbraced `if`).
#define JITUNWIND_TRY_ASSIGN(lhs, expr) \
  JITUNWIND_TRY_ASSIGN_(JITUNWIND_TRY_CONCAT_(jitunwind_try_value_, __LINE__), lhs, expr)
#define JITUNWIND_TRY_CONCAT_(a, b) JITUNWIND_TRY_CONCAT2_(a, b)
#define JITUNWIND_TRY_CONCAT2_(a, b) a##b
#define JITUNWIND_TRY_ASSIGN_(tmp, lhs, expr)   \
  auto tmp = (expr);                            \
  if (!tmp.ok()) return std::move(tmp).error(); \
  lhs = std::move(tmp).value()
