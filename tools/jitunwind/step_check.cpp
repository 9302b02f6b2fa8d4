#include "step_check.hpp"

#include "cli.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>

namespace jitunwind::cli::stepcheck {

void frame_oracle::observe(uint64_t function_start, uint64_t sp, uint64_t fp, bool entry,
                           uint64_t ra_at_sp) {
  // A frame is gone once the stack pointer is at or above its CFA. At an entry the word at sp
  // is the new return address: a frame whose CFA is sp + 8 was left by a tail jump.
  const uint64_t gone_at = entry ? sp + 8 : sp;
  while (!frames_.empty() && frames_.back().cfa <= gone_at) frames_.pop_back();
  if (!entry) return;
  frames_.push_back({function_start, sp + 8, ra_at_sp, fp});
  if (frames_.size() > deepest_) deepest_ = frames_.size();
}

const page_cache::page* page_cache::get(uint64_t base) {
  for (size_t i = 0; i < used_; ++i)
    if (pages_[i]->base == base) return pages_[i].get();
  if (used_ == pages_.size()) pages_.push_back(std::make_unique<page>());
  page& p = *pages_[used_++];
  p.base = base;
  iovec local{p.bytes, sizeof p.bytes};
  iovec remote{reinterpret_cast<void*>(base), sizeof p.bytes};
  p.ok = process_vm_readv(pid_, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof p.bytes);
  return &p;
}

bool page_cache::read(uint64_t address, void* out, size_t len) {
  auto* dst = static_cast<uint8_t*>(out);
  while (len > 0) {
    const uint64_t base = address & ~uint64_t{4095};
    const page* p = get(base);
    if (!p->ok) return false;
    const size_t off = address - base;
    const size_t n = std::min(len, sizeof p->bytes - off);
    std::memcpy(dst, p->bytes + off, n);
    dst += n;
    address += n;
    len -= n;
  }
  return true;
}

sframe::memory_reader page_cache::reader() noexcept {
  return {[](void* self, uint64_t a, void* out, size_t n) {
            return static_cast<page_cache*>(self)->read(a, out, n);
          },
          this};
}

std::vector<uint64_t> published_code::entry_points(size_t max) const {
  std::vector<uint64_t> entries;
  for (const loaded_window& w : windows_) {
    if (!w.table) continue;
    auto decoded = sframe::decode(w.sframe, w.table->section_address());
    if (!decoded) continue;
    for (const function_desc& f : decoded->functions) {
      const uint32_t step = f.pcmask_rep != 0 ? f.pcmask_rep : std::max<uint32_t>(f.size, 1);
      for (uint64_t at = f.start; at < f.start + std::max<uint32_t>(f.size, 1); at += step) {
        if (entries.size() == max) return entries;
        entries.push_back(at);
      }
    }
  }
  return entries;
}

result<void> published_code::refresh() {
  auto changes = reader_.change_count();
  if (!changes) return std::move(changes).error();
  if (seen_ == *changes) return {};
  auto windows = load_windows(reader_, abi::amd64);  // what this checker (and its oracle) knows
  if (!windows) return std::move(windows).error();
  // All of it is built before any of it replaces the previous state. The unwinder points at
  // the tables inside `windows`, which moving the vector keeps in place.
  sframe::unwinder unwinder;
  size_t functions = 0;
  for (const loaded_window& w : *windows) {
    if (!w.table) continue;
    if (auto ok = unwinder.add(&*w.table); !ok) return ok;
    functions += w.table->info().num_fdes;
  }
  windows_ = std::move(windows).value();
  unwinder_ = std::move(unwinder);
  functions_ = std::max(functions_, functions);
  seen_ = *changes;
  for (const loaded_window& w : windows_) {
    if (w.why.empty()) continue;
    const bool known =
        std::any_of(unusable_seen_.begin(), unusable_seen_.end(), [&](const unusable_window& u) {
          return u.record.window_id == w.record.window_id &&
                 u.record.generation == w.record.generation;
        });
    if (!known) unusable_seen_.push_back({w.record, w.why});
  }
  return {};
}

const remote::window_record* published_code::window_at(uint64_t pc,
                                                       const std::string** why) const noexcept {
  for (const loaded_window& w : windows_) {
    const remote::window_record& r = w.record;
    if (pc < r.text_start || pc - r.text_start >= r.text_size) continue;
    if (why != nullptr) *why = w.why.empty() ? nullptr : &w.why;
    return &r;
  }
  return nullptr;
}

namespace {

std::string signed_text(int64_t v) {
  return (v < 0 ? " - " : " + ") + std::to_string(v < 0 ? -v : v);
}

// "CFA = rsp + 24, RA at CFA - 8, rbp at CFA - 16": the published row, as the runtime wrote it.
std::string row_text(const frame_row& r) {
  if (r.ra == ra_rule::undefined) return "outermost (RA undefined)";
  std::string t =
      std::string("CFA = ") + (r.cfa == cfa_base::sp ? "rsp" : "rbp") + signed_text(r.cfa_offset);
  t += r.ra == ra_rule::saved ? ", RA at CFA" + signed_text(r.ra_offset) : ", RA in a register";
  if (r.fp == fp_rule::saved) t += ", rbp at CFA" + signed_text(r.fp_offset);
  return t;
}

}  // namespace

std::optional<mismatch> compare(const published_code& code, const frame_oracle& oracle,
                                const sframe::regs& at, const sframe::memory_reader& memory,
                                size_t max_frames, size_t& compared) {
  compared = 0;
  const auto& frames = oracle.frames();
  sframe::regs cur = at;
  for (size_t depth = 0; depth < frames.size() && depth < max_frames; ++depth) {
    const expected_frame& want = frames[frames.size() - 1 - depth];
    sframe::lookup_result row;
    // A caller's pc is a return address: the call is the instruction before it.
    if (!code.unwinder().find(depth == 0 ? cur.pc : cur.pc - 1, row)) break;
    auto bad = [&](std::string what) {
      return mismatch{at.pc, depth, cur.pc, want.function_start, std::move(what)};
    };
    if (row.function_start != want.function_start)
      return bad("the rows found for this pc are those of the function at " +
                 hex_text(row.function_start) +
                 ", but the last function entered and not left "
                 "starts at " +
                 hex_text(want.function_start));
    // The CFA is compared before anything is read through it: a wrong CFA makes the step read
    // the return address from a stale stack slot, and what that slot happens to hold (zero, a
    // pointer) must not decide which error is reported.
    if (row.row.ra != ra_rule::undefined) {
      const bool from_sp = row.row.cfa == cfa_base::sp;
      const uint64_t base = from_sp ? cur.sp : cur.fp;
      const uint64_t cfa = base + static_cast<uint64_t>(static_cast<int64_t>(row.row.cfa_offset));
      if (cfa != want.cfa) {
        // In the row's own terms: what offset from its base register would have been right.
        const int64_t right = static_cast<int64_t>(want.cfa - base);
        return bad("caller's stack pointer (CFA): expected " + hex_text(want.cfa) +
                   ", unwound " + hex_text(cfa) + "\n  published row: " +
                   row_text(row.row) + "; the true CFA is " + (from_sp ? "rsp" : "rbp") +
                   signed_text(right));
      }
    }
    const sframe::step_result s = sframe::step(abi::amd64, row.row, cur, depth == 0, memory);
    if (!s.ok)
      return bad(std::string("the unwind stopped (") + sframe::to_string(s.reason) +
                 ") where the caller at " + hex_text(want.ra) + " was expected");
    if (s.caller.pc != want.ra)
      return bad("return address: expected " + hex_text(want.ra) + ", unwound " +
                 hex_text(s.caller.pc) + "\n  published row: " + row_text(row.row));
    if (s.caller.fp != want.caller_fp)
      return bad("caller's frame pointer (rbp): expected " + hex_text(want.caller_fp) +
                 ", unwound " + hex_text(s.caller.fp) + "\n  published row: " + row_text(row.row));
    ++compared;
    cur = s.caller;
  }
  return std::nullopt;
}

}  // namespace jitunwind::cli::stepcheck
