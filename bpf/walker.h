/* walker.h — the only contract between the BPF walker (walker.bpf.c) and jitwalk (user space).
 *
 * Included by both sides: fixed-width types only, explicit padding, sizes pinned with static
 * asserts. x86-64 only (the return address is always at CFA - 8).
 *
 * Tables. User space converts every unwind table it trusts (a native object's .sframe or
 * .eh_frame, a JIT window's SFrame) into one "range": an address interval [start, end) in the
 * target process plus a slice of the global row array. Rows of a range are sorted by pc_off
 * (offset from range.start); the row for a PC is the last one with pc_off <= pc - start. Gaps
 * between functions are explicit JW_ROW_GAP rows, so a PC inside a range but outside every
 * function falls back to the frame pointer instead of borrowing a neighbour's rule.
 *
 * Update protocol (no stale rows, no torn tables):
 *  - The range index is double-buffered: user space fills the inactive half, then publishes
 *    it with a single 32-bit store to ctl.active. A walk reads ctl.active once.
 *  - Rows are never rewritten while any index half references them. Each half has a sequence
 *    number that user space bumps around every rewrite of that half; a walk whose half's
 *    sequence changed while it ran is discarded (JW_STOP_TABLE_RACE).
 *  - The row array itself may be replaced by a larger copy (jw_rows is an array of one map): user
 *    space copies every row to the same index first, so a walk reading either array sees the
 *    rows its index half refers to. Rows of one object mapped by several processes are shared:
 *    several ranges (one per address space) refer to the same slice.
 *  - JIT windows: the window_free USDT handler records the freed generation in jw_windows
 *    synchronously, in the target's own thread, before the runtime can reuse the memory. A range
 *    whose generation is not newer than the freed one is never used (counted as stale-table
 *    rejections), even before user space has removed it.
 */
#ifndef JITWALK_WALKER_H
#define JITWALK_WALKER_H

#ifdef __bpf__
/* vmlinux.h provides __u8 ... __u64 */
#else
#include <linux/types.h>
#endif

#ifdef __cplusplus
#define JW_STATIC_ASSERT static_assert
#else
#define JW_STATIC_ASSERT _Static_assert
#endif

#ifdef __bpf__
#define JW_INLINE static __always_inline
#else
#define JW_INLINE static inline
#endif

/* Hard caps compiled into the BPF program (runtime limits may be lower). */
#define JW_MAX_DEPTH 1024        /* frames per user stack (power of two: cheap bounds proofs) */
#define JW_DEFAULT_DEPTH 127     /* profile default (jw_config.max_depth) */
#define JW_MAX_TRUTH 512         /* ground-truth entries per checkpoint (protocol maximum) */
#define JW_KSTACK_DEPTH 127      /* bpf_get_stack frames (kernel.perf_event_max_stack default) */
#define JW_RANGE_CAP 16384       /* ranges per index half */
#define JW_RANGE_SEARCH_STEPS 15 /* ceil(log2(JW_RANGE_CAP + 1)) */
#define JW_ROW_SEARCH_STEPS 24   /* rows per range < 2^24 */
#define JW_MAX_ROWS_PER_RANGE ((1u << JW_ROW_SEARCH_STEPS) - 1)
#define JW_UID_BITS 24 /* range uids fit in the upper 24 bits of a frame's meta */
#define JW_COMM_LEN 16
#define JW_NAME_LEN 128 /* code_add names are truncated to this many bytes (with NUL) */

/* Row kinds. */
enum jw_row_kind {
  JW_ROW_GAP = 0,       /* no function covers this PC: fall back to the frame pointer */
  JW_ROW_CFA_SP = 1,    /* CFA = SP + cfa_off */
  JW_ROW_CFA_FP = 2,    /* CFA = FP + cfa_off */
  JW_ROW_OUTERMOST = 3, /* return address undefined: the stack ends here (a proper root) */
  /* An SFrame v3 (FLEX) rule the walker cannot apply: the CFA, RA or FP comes from a register
     other than SP and FP (only the interrupted frame has those, and the walk does not carry
     them). The walk ends here, counted (JW_STOP_UNSUPPORTED_RULE), never guesses a frame. */
  JW_ROW_UNSUPPORTED = 4,
};
/* Row flags. */
#define JW_ROW_FP_SAVED 0x1      /* caller's FP is in memory (at CFA + fp_off unless below) */
#define JW_ROW_FROM_EH_FRAME 0x2 /* row came from .eh_frame (statistics: frame source) */
#define JW_ROW_CFA_DEREF 0x4     /* v3: CFA = *(SP|FP + cfa_off) (a realigned stack, DRAP) */
#define JW_ROW_RA_OFF 0x8        /* v3: RA at CFA + ra_off instead of CFA - 8 */
#define JW_ROW_FP_AT_FP 0x10     /* v3: the saved FP is at (callee's FP) + fp_off */
#define JW_ROW_FP_AT_SP 0x20     /* v3: the saved FP is at (callee's SP) + fp_off */

struct jw_row {
  __u32 pc_off; /* from range.start */
  __s32 cfa_off;
  __s32 fp_off;
  __u8 kind;
  __u8 flags;
  __s16 ra_off; /* with JW_ROW_RA_OFF */
};
JW_STATIC_ASSERT(sizeof(struct jw_row) == 16, "jw_row layout");

/* Range kinds (also the "source" of a frame in statistics). */
enum jw_range_kind {
  JW_RANGE_NONE = 0,
  JW_RANGE_SFRAME = 1,  /* native object, .sframe */
  JW_RANGE_EHFRAME = 2, /* native object, .eh_frame */
  JW_RANGE_JIT = 3,     /* JIT window published through the jitunwind registry */
};

struct jw_range {
  __u64 start;      /* first byte covered */
  __u64 end;        /* one past the last byte */
  __u64 window_id;  /* JIT: registry window id; 0 otherwise */
  __u64 generation; /* JIT: window generation these rows describe */
  __u32 row_first;  /* index into jw_rows */
  __u32 row_count;  /* >= 1 */
  __u32 uid;        /* unique per loaded table (never reused during a session), < 2^24 */
  __u16 kind;       /* enum jw_range_kind */
  __u16 reserved0;
  __u64 reserved1;
};
JW_STATIC_ASSERT(sizeof(struct jw_range) == 56, "jw_range layout");

/* Index control, one element of a BPF_F_MMAPABLE array. User space rewrites only the inactive
 * half: it increments seq[half] before touching it, fills ranges and nranges[half], then
 * stores active = half. A walk reads active once and is valid iff seq[active] did not change
 * while it ran. Row slots are reused only once no half references them any more. */
struct jw_ctl {
  __u32 active; /* 0 or 1: which half of jw_ranges is current */
  __u32 nranges[2];
  __u32 reserved;
  __u64 seq[2];
};
JW_STATIC_ASSERT(sizeof(struct jw_ctl) == 32, "jw_ctl layout");

/* Per-window state maintained by the USDT handlers (key: window id). Generations are unique
 * and strictly increasing in a process (docs/registry-abi.md), 0 = none. Rows of a generation
 * stay valid while the window is retired (its code may still be on stacks and its memory is
 * unchanged during the grace period); window_free means the memory is about to be reused or
 * unmapped, so every range with generation <= freed_gen is refused from then on. */
struct jw_window_state {
  __u64 published_gen; /* last generation announced by window_publish */
  __u64 retired_gen;   /* last generation announced by window_retire */
  __u64 freed_gen;     /* last generation announced by window_free */
};
JW_STATIC_ASSERT(sizeof(struct jw_window_state) == 24, "jw_window_state layout");

/* How the walk went from frame i to frame i+1 (low 4 bits of frame meta). */
enum jw_method {
  JW_M_TABLE = 1,    /* a row of a trusted table */
  JW_M_FP = 2,       /* frame-pointer fallback: no table covers the PC */
  JW_M_FP_GAP = 3,   /* frame-pointer fallback: PC in a table's gap */
  JW_M_FP_STALE = 4, /* frame-pointer fallback: the window was freed (rows not used) */
  JW_M_END = 5,      /* last frame (see stop reason) */
  /* The interrupted frame had no rows and its caller was taken from the return address at SP
   * (a frameless leaf, or one that has just pushed rbp: then at SP + 8), where the frame-pointer
   * fallback would skip that caller. Used only once the address is validated: in executable
   * memory, right after a call instruction. */
  JW_M_SP_RA = 6,
};
/* frame meta = method | (range kind << 4) | (range uid << 8). */
#define JW_META(method, kind, uid) ((__u32)(method) | ((__u32)(kind) << 4) | ((__u32)(uid) << 8))
#define JW_META_METHOD(m) ((m)&0xf)
#define JW_META_KIND(m) (((m) >> 4) & 0xf)
#define JW_META_UID(m) ((m) >> 8)

/* Why a walk stopped. */
enum jw_stop {
  JW_STOP_OUTERMOST = 1,         /* a table row said: no caller (root) */
  JW_STOP_FP_END = 2,            /* frame-pointer fallback reached FP == 0 (end of the FP chain) */
  JW_STOP_RA_ZERO = 3,           /* return address 0 */
  JW_STOP_DEPTH = 4,             /* depth cap */
  JW_STOP_READ = 5,              /* could not read the RA or saved FP (unmapped, paged out) */
  JW_STOP_NO_PROGRESS = 6,       /* the caller's SP was not above the callee's */
  JW_STOP_BAD_FP = 7,            /* fallback: FP below SP or misaligned */
  JW_STOP_TABLE_RACE = 8,        /* tables were rewritten during the walk: result discarded */
  JW_STOP_NO_USER = 9,           /* no user context (kernel thread) */
  JW_STOP_UNSUPPORTED_RULE = 10, /* a v3 rule the walker cannot follow (JW_ROW_UNSUPPORTED) */
  /* The PC is in JIT code published a moment ago whose rows are not loaded yet (jw_recent): a
   * frame-pointer step there would be a guess — right if the code keeps a frame pointer, else
   * it silently skips the JIT callers up to the next frame that does — so the walk ends. */
  JW_STOP_ROWS_PENDING = 11,
  JW_STOP_COUNT_ = 12,
};

/* Statistics counters (per-CPU array, index = enum). */
enum jw_stat {
  JW_STAT_SAMPLES = 0,      /* perf samples of the target */
  JW_STAT_OTHER_TASK = 1,   /* perf samples of other processes (filtered out) */
  JW_STAT_STORED = 2,       /* samples aggregated */
  JW_STAT_DROPPED_MAP = 3,  /* lost: a map was full */
  JW_STAT_STALE_REJECT = 4, /* frames whose window was freed (rows refused) */
  JW_STAT_RACES = 5,        /* walks discarded because tables changed */
  JW_STAT_CHECKPOINTS = 6,  /* checkpoint probe hits */
  JW_STAT_RINGBUF_FULL = 7, /* events lost: ring buffer full */
  JW_STAT_FRAMES = 8,       /* frames walked */
  JW_STAT_FP_FRAMES = 9,    /* walks that used the frame-pointer fallback */
  JW_STAT_EVENTS = 10,      /* registry / code / loader events */
  JW_STAT_STOPS = 11,       /* target stopped for synchronous table loading */
  JW_STAT_WALK_NS = 12,     /* time spent in sample programs for the target (bpf_ktime) */
  /* Perf samples of tasks not followed that were exiting: a followed process is no longer
   * followed from sched_process_exit on, but its inherited perf event fires until later in
   * do_exit (with no user stack left: exit_mm came first). Not "other tasks". */
  JW_STAT_EXITING = 13,
  JW_STAT_COUNT_ = 14,
};

/* A walked user stack (value of jw_stacks; the walk in checkpoint events). The map's value size
 * is set at load time to hold exactly jw_config.max_depth frames (jw_stack_bytes). */
struct jw_frame {
  __u64 pc;   /* frames[0].pc = interrupted PC, then return addresses */
  __u32 meta; /* JW_META */
  /* Frames stepped without a table row (method JW_M_FP*): the low 32 bits of the newest
   * publication generation announced when the walk ran (window_publish), so the frame is named
   * by the code published at that moment; 0 otherwise. Part of the stack's hash. */
  __u32 stamp;
};
JW_STATIC_ASSERT(sizeof(struct jw_frame) == 16, "jw_frame layout");

struct jw_stack {
  __u16 depth; /* valid entries in frames (<= JW_MAX_DEPTH) */
  /* The method (enum jw_method) of the step that failed at the last frame, i.e. what the walk
   * tried when it stopped: JW_M_TABLE, or JW_M_FP / _GAP / _STALE for the frame-pointer
   * fallback (the range kind is the last frame's meta kind). 0 when no step failed: a table's
   * outermost row, the depth limit, the kernel's frame-pointer walk. */
  __u8 end_method;
  __u8 reserved;
  __u8 stop;     /* enum jw_stop */
  __u8 fallback; /* 1 if any frame used the frame-pointer fallback */
  __u16 stale;   /* frames whose freed window's rows were refused */
  struct jw_frame frames[JW_MAX_DEPTH];
};
JW_STATIC_ASSERT(sizeof(struct jw_stack) == 8 + 16 * JW_MAX_DEPTH, "jw_stack layout");
#define jw_stack_bytes(depth) (8 + 16 * (depth))

/* Aggregation key (jw_counts). */
struct jw_count_key {
  __u64 ustack; /* hash of the user stack (key into jw_stacks) */
  __u32 tgid;
  __u32 tid;    /* 0 unless per-thread aggregation is on */
  __s32 kstack; /* bpf_get_stackid() id, or negative when kernel stacks are off/failed */
  __u32 asid;   /* the address space the stack was walked in (jw_task.asid) */
};
JW_STATIC_ASSERT(sizeof(struct jw_count_key) == 24, "jw_count_key layout");

/* Ring buffer events. */
enum jw_event_type {
  JW_EV_WINDOW_PUBLISH = 1,
  JW_EV_WINDOW_RETIRE = 2,
  JW_EV_WINDOW_FREE = 6,
  JW_EV_CODE_ADD = 3,
  JW_EV_LOADER = 4,     /* the dynamic loader changed the link map (_dl_debug_state) */
  JW_EV_CHECKPOINT = 5, /* verify mode */
  JW_EV_FORK = 7,       /* a followed process forked a new process (jw_task_event) */
  JW_EV_EXEC = 8,       /* a followed process exec'd: it has a new address space id */
  JW_EV_EXIT = 9,       /* the last thread of a followed process exited */
};

struct jw_event_header {
  __u32 type;
  __u32 tgid;
  __u32 tid;
  __u32 stopped; /* 1 if the handler sent SIGSTOP (user space must SIGCONT) */
  __u64 time_ns; /* bpf_ktime_get_ns() */
};
JW_STATIC_ASSERT(sizeof(struct jw_event_header) == 24, "jw_event_header layout");

/* Process trees. Every followed process (jw_follow, key: tgid) has an address-space id (asid):
 * the root 0, a forked child its parent's (same mappings until it execs), an exec'd process a
 * new one allocated by the exec handler. Ranges of all address spaces live in the one sorted
 * index: range start/end and the walker's search key carry the asid above the user address
 * bits, (asid << JW_ASID_SHIFT) | pc, so a search never leaves its own address space. JIT window
 * states (jw_windows) are keyed by window id ^ (asid << JW_WINDOW_ASID_SHIFT). */
#define JW_ASID_SHIFT 47 /* x86-64 user addresses are < 2^47 (4-level paging) */
#define JW_ASID_LIMIT (1u << (64 - JW_ASID_SHIFT))
#define JW_ASID_NONE (JW_ASID_LIMIT - 1) /* allocation exhausted: no tables, FP fallback */
#define JW_WINDOW_ASID_SHIFT 46
#define JW_TASK_SKIP_EXEC 0x1 /* the next exec is the command's own start: keep the asid */

struct jw_task {
  __u32 asid;
  __u32 flags; /* JW_TASK_* */
};
JW_STATIC_ASSERT(sizeof(struct jw_task) == 8, "jw_task layout");

struct jw_task_event { /* fork, exec, exit; h.tgid is the process concerned */
  struct jw_event_header h;
  __u32 parent_tgid; /* fork: the parent */
  __u32 asid;        /* the process's asid from now on (exit: the one it had) */
  char comm[JW_COMM_LEN];
};
JW_STATIC_ASSERT(sizeof(struct jw_task_event) == 24 + 8 + JW_COMM_LEN, "jw_task_event layout");

struct jw_window_event { /* publish, retire and free */
  struct jw_event_header h;
  __u64 id;
  __u64 generation;
  __u64 text;
  __u64 text_len;
  __u64 sframe;
  __u64 sframe_len;
};
JW_STATIC_ASSERT(sizeof(struct jw_window_event) == 24 + 48, "jw_window_event layout");

struct jw_code_event {
  struct jw_event_header h;
  __u64 addr;
  __u64 size;
  __u64 window_id;
  __u64 generation; /* the publication that made it visible; 0: not given (older SDKs) */
  char name[JW_NAME_LEN];
};
JW_STATIC_ASSERT(sizeof(struct jw_code_event) == 24 + 32 + JW_NAME_LEN, "jw_code_event layout");

/* A checkpoint: a variable-size record. After the fixed part come truth_n ground-truth
 * addresses (u64), fp_n PCs of the kernel's frame-pointer walk (u64), then walk_depth frames of
 * our walk (struct jw_frame). */
struct jw_checkpoint_event {
  struct jw_event_header h;
  __s64 tag;
  __u64 truth_count;    /* as passed by the probe (> JW_MAX_TRUTH: not copied) */
  __u64 truth_addr;     /* the array's address in the target */
  __s32 truth_read_err; /* bpf_probe_read_user result for the array (0 = ok) */
  __s32 fp_err;         /* bpf_get_stack() error, 0 if fine */
  __u32 truth_n;
  __u32 fp_n;
  __u32 walk_depth;
  __u8 walk_stop;
  __u8 walk_fallback;
  __u16 walk_stale;
  __u8 walk_end_method; /* jw_stack.end_method: the step that failed at the last frame */
  __u8 reserved[7];
};
JW_STATIC_ASSERT(sizeof(struct jw_checkpoint_event) == 24 + 56, "jw_checkpoint_event layout");
#define JW_CHECKPOINT_DATA_MAX (8 * JW_MAX_TRUTH + 8 * JW_KSTACK_DEPTH + 16 * JW_MAX_DEPTH)

/* Runtime settings (BPF .data, written by user space before and during the run). */
struct jw_config {
  __u32 target_tgid;
  __u32 max_depth; /* <= JW_MAX_DEPTH */
  __u32 kernel_stacks;
  __u32 per_thread;
  __u32 stop_on_publish; /* synchronous table loading: SIGSTOP on window_publish */
  __u32 stop_on_loader;  /* SIGSTOP on _dl_debug_state so new objects get probes first */
  __u32 fp_only;         /* walk with frame pointers only (cost baseline) */
  __u32 follow_children; /* followed processes' new processes are followed too */
  __u32 jit_rows;        /* user space loads JIT windows' rows: jw_recent is kept */
  __u32 reserved;
};
JW_STATIC_ASSERT(sizeof(struct jw_config) == 40, "jw_config layout");

/* The last JW_RECENT_CAP window publications (BPF .bss, written by the window_publish handler,
 * slot chosen by the generation): where the code published a moment ago lies. A walk that
 * finds no usable rows for a PC inside one of them (no range yet, or only an older generation's)
 * stops with JW_STOP_ROWS_PENDING instead of guessing with the frame pointer, unless the window
 * was freed since. start/end carry the address space like range keys ((asid << JW_ASID_SHIFT) |
 * address); window_key like jw_windows keys. Written without a lock: a torn entry can only make
 * one walk stop early or guess as before. */
#define JW_RECENT_CAP 64
struct jw_recent {
  __u64 start;
  __u64 end;
  __u64 window_key;
  __u64 generation; /* 0: unused */
};
JW_STATIC_ASSERT(sizeof(struct jw_recent) == 32, "jw_recent layout");

/* Length of an x86-64 `call` with opcode FF /2 whose ModRM byte is m (SIB byte sib), 0 if m does
 * not encode /2. A REX prefix before FF does not change where the instruction ends. */
JW_INLINE __u32 jw_call_ff_length(__u8 m, __u8 sib) {
  if (((m >> 3) & 7) != 2) return 0;
  __u8 mod = m >> 6, rm = m & 7;
  if (mod == 3) return 2;
  if (mod == 0) return rm == 4 ? ((sib & 7) == 5 ? 7 : 3) : rm == 5 ? 6 : 2;
  if (mod == 1) return rm == 4 ? 4 : 3;
  return rm == 4 ? 7 : 6;
}

/* Whether b[0..7], the 8 bytes before an address, end with a call instruction (call rel32, or a
 * call through a register or memory): the address is then a return address, and the call's
 * function is found at address - 1. Used by the walker to validate a frameless leaf's return
 * address (JW_M_SP_RA) and by the symbolizer to tell a return address from a continuation a
 * runtime pushed itself (docs/jitwalk.md, "Symbolization"). */
JW_INLINE int jw_ends_with_call(const __u8* b) {
  return b[3] == 0xe8 || (b[1] == 0xff && jw_call_ff_length(b[2], b[3]) == 7) ||
         (b[2] == 0xff && jw_call_ff_length(b[3], b[4]) == 6) ||
         (b[4] == 0xff && jw_call_ff_length(b[5], b[6]) == 4) ||
         (b[5] == 0xff && jw_call_ff_length(b[6], b[7]) == 3) ||
         (b[6] == 0xff && jw_call_ff_length(b[7], 0) == 2);
}

#endif /* JITWALK_WALKER_H */
