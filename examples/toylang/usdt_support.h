// Dynamic USDT helpers shared by the example runtimes (providers `toyjit` and `toyinterp`).
#pragma once

#include <jitunwind/usdt.h>

#include <chrono>
#include <span>
#include <string>

namespace toylang {

/// The ground-truth probe `checkpoint(i64 tag, u64 count, ptr addrs)` (docs/ground-truth.md).
inline constexpr jitunwind::usdt::arg_type checkpoint_args[] = {jitunwind::usdt::arg_type::i64,
                                                                jitunwind::usdt::arg_type::u64,
                                                                jitunwind::usdt::arg_type::pointer};

/// Fires `checkpoint` if a tracer is attached and the chain fits the protocol (at most 512
/// entries; deeper chains are not reported at all).
void fire_checkpoint(const jitunwind::usdt::probe& p, int64_t tag, std::span<const uint64_t> addrs);

/// --wait-for-tracer: prints how to attach to stderr, then waits until one of `probes` is
/// enabled (a tracer attached), or all of them when `all` is set, and a little longer (the
/// kernel enables the semaphore just before the tracer's program is attached). A tracer
/// attaches its probes one by one, so a runtime that must not run before a tracer sees all of
/// its events waits for all of them. False on timeout.
bool wait_for_tracer(const char* program, const jitunwind::usdt::provider& provider,
                     std::span<const jitunwind::usdt::probe> probes, std::chrono::seconds timeout,
                     bool all = false);

}  // namespace toylang
