// Unwind rows as the BPF walker consumes them, and their construction from the SDK's frame
// model (SFrame) and from .eh_frame.
//
// Every table source is first turned into `unwind_function`s (a function's range plus rows in
// the walker's vocabulary: CFA from SP or FP (SFrame v3: possibly loaded from there), RA at
// CFA - 8 (v3: another CFA offset), FP saved or unchanged (v3: saved relative to SP or FP), or
// "no usable rule here" / "outermost frame" / "a v3 rule the walker cannot follow"). `flatten` then
// lays a sorted set of functions out as one `range_rows`: one row array over [start, end) with
// explicit gap rows between functions, PCMASK functions expanded, equal neighbours merged.
#pragma once

#include <jitunwind/frame.h>

#include "jitwalk/common.hpp"
#include "walker.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace jitwalk {

enum class rule : uint8_t {
  gap = JW_ROW_GAP,                  ///< nothing usable: frame-pointer fallback
  cfa_sp = JW_ROW_CFA_SP,            ///< CFA = SP + cfa_off
  cfa_fp = JW_ROW_CFA_FP,            ///< CFA = FP + cfa_off
  outermost = JW_ROW_OUTERMOST,      ///< no caller
  unsupported = JW_ROW_UNSUPPORTED,  ///< a v3 rule needing another register: the walk ends
};

/// Where a saved FP is, relative to what (v3 rules may use the callee's SP or FP).
enum class fp_base : uint8_t { cfa = 0, fp = 1, sp = 2 };

enum class table_source : uint8_t {
  sframe = JW_RANGE_SFRAME,
  eh_frame = JW_RANGE_EHFRAME,
  jit = JW_RANGE_JIT,
};
const char* to_string(table_source s) noexcept;

struct unwind_row {
  uint32_t pc_off = 0;  ///< from the function start (or the block start for PCMASK)
  rule kind = rule::cfa_sp;
  int32_t cfa_off = 8;
  bool fp_saved = false;
  int32_t fp_off = 0;
  bool cfa_deref = false;          ///< v3: CFA = *(SP|FP + cfa_off)
  int16_t ra_off = -8;             ///< v3: the RA at another offset from the CFA
  fp_base fp_from = fp_base::cfa;  ///< v3: fp_off relative to the callee's FP or SP
  bool operator==(const unwind_row&) const = default;
};

struct unwind_function {
  uint64_t start = 0;
  uint32_t size = 0;
  uint32_t pcmask_rep = 0;  ///< 0 = rows by pc - start; else by (pc - start) % pcmask_rep
  table_source source = table_source::sframe;
  std::vector<unwind_row> rows;  ///< sorted, first at 0
};

/// Converts one SDK function (decoded SFrame v1/v2/v3) for the AMD64 walker. SFrame v3 rules it
/// can apply are kept (a dereferenced CFA, the RA at another CFA offset, the FP saved relative
/// to SP or FP); rules naming another register become `unsupported` rows (the walk ends there,
/// counted); a mangled RA becomes a gap row. A v3 function without rows (an outermost frame)
/// becomes one outermost row. `invalid_argument` if the function itself is malformed (rows
/// unsorted or past its end, no rows before v3).
result<unwind_function> from_frame_model(const jitunwind::function_desc& f, table_source source);

/// One range of the BPF tables.
struct range_rows {
  uint64_t start = 0;
  uint64_t end = 0;
  std::vector<jw_row> rows;
  size_t functions = 0;  ///< functions laid out
  size_t dropped = 0;    ///< functions dropped (overlapping a previous one)
};

struct flatten_limits {
  size_t max_rows = JW_MAX_ROWS_PER_RANGE;
  /// Only functions inside [lo, hi) are accepted (e.g. a JIT window's text); others are an
  /// error when `strict`, dropped otherwise.
  uint64_t lo = 0;
  uint64_t hi = UINT64_MAX;
  bool strict = false;
};

/// Lays out functions (any order) shifted by `bias` as one range. Overlapping functions: the
/// one starting first wins (counted in `dropped`); with `limits.strict` overlap and functions
/// outside [lo, hi) are errors (`malformed`, naming the function). `limit_exceeded` above
/// max_rows; `not_found` if no function remains.
result<range_rows> flatten(std::vector<unwind_function> functions, uint64_t bias,
                           const flatten_limits& limits = {});

/// The row the BPF program would pick for `pc` (the same binary search), or null. For tests.
const jw_row* lookup_row(const range_rows& r, uint64_t pc) noexcept;

}  // namespace jitwalk
