#include "jitwalk/cli.hpp"

#include <cstdlib>
#include <cstring>

namespace jitwalk {

arg_reader::arg_reader(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) args_.emplace_back(argv[i]);
}

bool arg_reader::is(std::initializer_list<const char*> names) {
  if (done()) return false;
  const std::string& a = args_[i_];
  for (const char* n : names) {
    const size_t len = std::strlen(n);
    if (a == n) {
      matched_ = n;
      has_inline_ = false;
      ++i_;
      return true;
    }
    // --name=value
    if (len > 2 && n[0] == '-' && n[1] == '-' && a.size() > len && a.compare(0, len, n) == 0 &&
        a[len] == '=') {
      matched_ = n;
      inline_value_ = a.substr(len + 1);
      has_inline_ = true;
      ++i_;
      return true;
    }
    // -F99
    if (len == 2 && n[0] == '-' && n[1] != '-' && a.size() > 2 && a.compare(0, 2, n) == 0 &&
        a[1] != '-') {
      matched_ = n;
      inline_value_ = a.substr(2);
      has_inline_ = true;
      ++i_;
      return true;
    }
  }
  return false;
}

result<std::string> arg_reader::value() {
  if (has_inline_) {
    has_inline_ = false;
    return inline_value_;
  }
  if (done())
    return make_error(errc::invalid_argument, "option %s needs a value", matched_.c_str());
  return args_[i_++];
}

result<long long> arg_reader::integer(long long lo, long long hi) {
  auto v = value();
  if (!v) return v.error();
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v->c_str(), &end, 10);
  if (errno != 0 || end == v->c_str() || *end != 0 || n < lo || n > hi) {
    return make_error(errc::invalid_argument, "%s: '%s' is not an integer in [%lld, %lld]",
                      matched_.c_str(), v->c_str(), lo, hi);
  }
  return n;
}

result<double> arg_reader::number(double lo, double hi) {
  auto v = value();
  if (!v) return v.error();
  char* end = nullptr;
  double n = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != 0 || !(n >= lo && n <= hi)) {
    return make_error(errc::invalid_argument, "%s: '%s' is not a number in [%g, %g]",
                      matched_.c_str(), v->c_str(), lo, hi);
  }
  return n;
}

std::vector<std::string> arg_reader::rest_after_separator() {
  if (done() || args_[i_] != "--") return {};
  std::vector<std::string> out(args_.begin() + static_cast<long>(i_) + 1, args_.end());
  i_ = args_.size();
  return out;
}

}  // namespace jitwalk
