#include <jitunwind/toolkit/input_cuts.hpp>

#include <jitunwind/toolkit/terminal_text.hpp>

namespace jitunwind::toolkit {

std::string input_cuts::add(std::string_view what, std::string_view why) {
  count_.fetch_add(1, std::memory_order_relaxed);
  return terminal_text(what) + " left out: " + terminal_text(why);
}

}  // namespace jitunwind::toolkit
