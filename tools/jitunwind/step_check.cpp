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

result<void> published_code::refresh() {
  auto changes = reader_.change_count();
  if (!changes) return std::move(changes).error();
  if (seen_ == *changes) return {};
  std::vector<remote::window_record> windows;
  std::vector<std::string> why;  // per window: empty if usable
  std::vector<std::vector<uint8_t>> bytes;
  // A window can change while its SFrame is copied (another thread of the target republishes
  // or frees it): the whole registry is read again. Only a copy that fails three times in a
  // row makes a window unusable.
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto snapshot = reader_.read();
    if (!snapshot) return std::move(snapshot).error();
    windows.clear();
    why.clear();
    bytes.clear();
    bool failed = false;
    for (const remote::window_record& w : snapshot->windows) {
      windows.push_back(w);
      why.emplace_back();
      bytes.emplace_back();
      if (w.sframe_size == 0) {
        why.back() = "it publishes no SFrame data";
      } else if (auto b = reader_.read_sframe(w)) {
        bytes.back() = std::move(b).value();
      } else {
        why.back() = b.error().message();
        failed = true;
      }
    }
    if (!failed) break;
  }
  std::vector<sframe::table> tables;
  tables.reserve(bytes.size());
  size_t functions = 0;
  for (size_t i = 0; i < windows.size(); ++i) {
    if (!why[i].empty()) continue;
    auto t = sframe::table::create(bytes[i], windows[i].sframe_address);
    if (!t) {
      why[i] = t.error().message();
      continue;
    }
    const remote::window_record& w = windows[i];
    if (t->info().target != abi::amd64) {  // what this checker (and its oracle) understands
      why[i] = std::string("its SFrame is for ") + to_string(t->info().target) + ", not amd64";
      continue;
    }
    // Rows for code elsewhere would describe whatever runs there with this window's rows.
    const auto [lo, hi] = t->pc_range();
    if (lo != hi && (lo < w.text_start || hi - w.text_start > w.text_size)) {
      why[i] = "its functions span " + hex_text(lo) + "-" + hex_text(hi) + ", outside its text " +
               hex_text(w.text_start) + "-" + hex_text(w.text_start + w.text_size);
      continue;
    }
    functions += t->info().num_fdes;
    tables.push_back(std::move(t).value());
  }
  // All of it is built before any of it replaces the previous state. The tables refer to
  // `bytes`' heap buffers, which moving the vectors keeps.
  sframe::unwinder unwinder;
  for (const sframe::table& t : tables)
    if (auto ok = unwinder.add(&t); !ok) return ok;
  windows_ = std::move(windows);
  why_unusable_ = std::move(why);
  bytes_ = std::move(bytes);
  tables_ = std::move(tables);
  unwinder_ = std::move(unwinder);
  functions_ = std::max(functions_, functions);
  seen_ = *changes;
  for (size_t i = 0; i < windows_.size(); ++i) {
    if (why_unusable_[i].empty()) continue;
    const bool known =
        std::any_of(unusable_seen_.begin(), unusable_seen_.end(), [&](const unusable_window& u) {
          return u.record.window_id == windows_[i].window_id &&
                 u.record.generation == windows_[i].generation;
        });
    if (!known) unusable_seen_.push_back({windows_[i], why_unusable_[i]});
  }
  return {};
}

const remote::window_record* published_code::window_at(uint64_t pc,
                                                       const std::string** why) const noexcept {
  for (size_t i = 0; i < windows_.size(); ++i) {
    const remote::window_record& w = windows_[i];
    if (pc < w.text_start || pc - w.text_start >= w.text_size) continue;
    if (why != nullptr) *why = why_unusable_[i].empty() ? nullptr : &why_unusable_[i];
    return &w;
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
    const sframe::step_result s = sframe::step(abi::amd64, row.row, cur, depth == 0, memory);
    if (!s.ok)
      return bad(std::string("the unwind stopped (") + sframe::to_string(s.reason) +
                 ") where the caller at " + hex_text(want.ra) + " was expected");
    if (s.caller.sp != want.cfa) {
      // In the row's own terms: what offset from its base register would have been right.
      const bool from_sp = row.row.cfa == cfa_base::sp;
      const int64_t right = static_cast<int64_t>(want.cfa - (from_sp ? cur.sp : cur.fp));
      return bad("caller's stack pointer (CFA): expected " + hex_text(want.cfa) + ", unwound " +
                 hex_text(s.caller.sp) + "\n  published row: " + row_text(row.row) +
                 "; the true CFA is " + (from_sp ? "rsp" : "rbp") + signed_text(right));
    }
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
