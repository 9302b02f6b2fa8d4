// Command-line parsing shared by the subcommands.
#pragma once

#include "jitwalk/common.hpp"
#include "jitwalk/run.hpp"

#include <string>
#include <vector>

namespace jitwalk {

/// Walks argv; knows "--opt VALUE", "--opt=VALUE", "-F99"/"-F 99" and the "--" separator.
class arg_reader {
 public:
  arg_reader(int argc, char** argv, int first);
  bool done() const { return i_ >= args_.size(); }
  /// The current argument (an option or a positional one).
  const std::string& current() const { return args_[i_]; }
  /// True (and consumes it) if the current argument is one of the names; for options with a
  /// value, use value() next.
  bool is(std::initializer_list<const char*> names);
  /// The value of the option just matched; error naming the option if missing.
  result<std::string> value();
  result<long long> integer(long long lo, long long hi);
  result<double> number(double lo, double hi);
  /// Everything after "--" (consumes it); empty if the current argument is not "--".
  std::vector<std::string> rest_after_separator();
  std::string unknown() const { return args_[i_]; }

 private:
  std::vector<std::string> args_;
  size_t i_ = 0;
  std::string matched_;
  std::string inline_value_;
  bool has_inline_ = false;
};

/// A usage error of `jitwalk SUBCOMMAND`: reports `e`, points to the subcommand's --help and
/// returns the exit status for usage errors (2).
int usage_failure(const char* subcommand, const error& e);

int cmd_profile(int argc, char** argv);
int cmd_verify(int argc, char** argv);
int cmd_tables(int argc, char** argv);

}  // namespace jitwalk
