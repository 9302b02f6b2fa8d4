// Code placers: where toy-jit puts its code and who gets told about it.
#pragma once

#include "jit.h"

#include <jitunwind/log.h>
#include <jitunwind/window.h>

#include <memory>
#include <optional>

namespace toyjit {

struct placer_options {
  /// Bytes of code per window (--windows=SIZE).
  size_t window_size = 1 << 20;
  /// Publishers (--publish=LIST); unset: the session's default (JITUNWIND_PUBLISH, else jitunwind::default_publishers).
  std::optional<jitunwind::publisher_set> publishers;
  jitunwind::log_sink log;
};

/// SDK code windows with the chosen publishers. Null with `error` set if the session cannot be
/// created.
std::unique_ptr<code_placer> make_sdk_placer(const placer_options& options, std::string& error);

}  // namespace toyjit
