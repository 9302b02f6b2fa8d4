// Private parts of the front end shared by its source files.
#pragma once

#include "toylang.h"

namespace toylang::detail {

/// Parses `source` into functions (unchecked). False on the first syntax error (in `errors`).
bool parse(const std::string& source, std::vector<function>& out, std::vector<diagnostic>& errors);

/// Resolves names and checks arities; appends every error found.
void check(program& p, std::vector<diagnostic>& errors);

}  // namespace toylang::detail
