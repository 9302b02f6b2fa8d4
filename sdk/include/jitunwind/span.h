/// jitunwind/span.h — a view of contiguous objects for the C++ API.
///
/// `std::span` is C++20 only, and the SDK's embedding headers must compile as C++17 too. A
/// function's signature (and so its linker name) must not change with the language level of
/// whoever includes the header, so the API uses this one type in every build. It converts from
/// anything with `data()` and `size()` (std::vector, std::array, std::string, std::span, ...)
/// and from C arrays, and in C++20 to `std::span`. It owns nothing: the viewed objects must
/// outlive it. Thread-safety: that of the viewed objects.
#pragma once

#include <cstddef>
#include <iterator>
#include <type_traits>

#if __cplusplus >= 202002L && __has_include(<span>)
#include <span>
#define JITUNWIND_HAVE_STD_SPAN 1
#endif

namespace jitunwind {

template <class T>
class span {
  // A container whose elements can be viewed as T (U* converts to T* without slicing).
  template <class C>
  using element_of = std::remove_pointer_t<decltype(std::data(std::declval<C&>()))>;
  template <class C>
  using if_viewable =
      std::enable_if_t<!std::is_array_v<std::remove_reference_t<C>> &&
                       std::is_convertible_v<element_of<C> (*)[], T (*)[]> &&
                       std::is_convertible_v<decltype(std::size(std::declval<C&>())), size_t>>;

 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using size_type = size_t;
  using pointer = T*;
  using reference = T&;
  using iterator = T*;

  constexpr span() noexcept = default;
  constexpr span(T* data, size_t size) noexcept : data_(data), size_(size) {}
  template <size_t N>
  constexpr span(T (&array)[N]) noexcept : data_(array), size_(N) {}  // NOLINT: implicit
  template <class C, class = if_viewable<C>>
  constexpr span(C& c) noexcept : data_(std::data(c)), size_(std::size(c)) {}  // NOLINT: implicit
  template <class C, class = if_viewable<const C>>
  constexpr span(const C& c) noexcept  // NOLINT: implicit by design
      : data_(std::data(c)), size_(std::size(c)) {}

#ifdef JITUNWIND_HAVE_STD_SPAN
  template <class U, size_t E, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  constexpr span(std::span<U, E> s) noexcept : data_(s.data()), size_(s.size()) {}  // NOLINT
  constexpr operator std::span<T>() const noexcept {
    return {data_, size_};
  }  // NOLINT: implicit
#endif

  constexpr T* data() const noexcept {
    return data_;
  }
  constexpr size_t size() const noexcept {
    return size_;
  }
  constexpr size_t size_bytes() const noexcept {
    return size_ * sizeof(T);
  }
  constexpr bool empty() const noexcept {
    return size_ == 0;
  }
  constexpr T* begin() const noexcept {
    return data_;
  }
  constexpr T* end() const noexcept {
    return data_ + size_;
  }
  constexpr T& operator[](size_t i) const noexcept {
    return data_[i];
  }
  constexpr T& front() const noexcept {
    return data_[0];
  }
  constexpr T& back() const noexcept {
    return data_[size_ - 1];
  }
  /// Sub-views; like std::span, the counts must be within the view.
  constexpr span first(size_t n) const noexcept {
    return {data_, n};
  }
  constexpr span last(size_t n) const noexcept {
    return {data_ + size_ - n, n};
  }
  constexpr span subspan(size_t offset, size_t n = size_t(-1)) const noexcept {
    return {data_ + offset, n == size_t(-1) ? size_ - offset : n};
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

template <class T, size_t N>
span(T (&)[N]) -> span<T>;
template <class C>
span(C&) -> span<std::remove_pointer_t<decltype(std::data(std::declval<C&>()))>>;
template <class C>
span(const C&) -> span<std::remove_pointer_t<decltype(std::data(std::declval<const C&>()))>>;

}  // namespace jitunwind
