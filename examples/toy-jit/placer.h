// Code placers: where toy-jit puts its code and who gets told about it.
#pragma once

#include "jit.h"

#include <memory>

namespace toyjit {

/// Anonymous pages with no publication at all (bring-up and comparison only).
std::unique_ptr<code_placer> make_mmap_placer();

}  // namespace toyjit
