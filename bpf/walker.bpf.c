// SPDX-License-Identifier: GPL-2.0-only
/* walker.bpf.c — user-stack walker for JIT code without frame pointers.
 *
 * Programs:
 *  - jw_sample (perf_event): walks the target's user stack with the row tables user space put in
 *    jw_rows/jw_ranges, aggregates (stack hash -> count) in jw_counts/jw_stacks.
 *  - jw_sample_kfp (perf_event): the same aggregation with the kernel's frame-pointer walk
 *    (bpf_get_stack(BPF_F_USER_STACK)); a cost baseline for benchmarks.
 *  - jw_checkpoint (usdt): verify mode; walks at every ground-truth checkpoint and sends our
 *    walk, the kernel's frame-pointer walk and the ground truth to user space.
 *  - jw_window_publish / jw_window_retire / jw_window_free / jw_code_add (usdt): the SDK's
 *    events; they keep jw_windows current synchronously (a freed window's rows are refused from
 *    that moment on) and forward the events to user space.
 *  - jw_loader (uprobe on the dynamic loader's _dl_debug_state, and USDT jitunwind:usdt_load
 *    where the SDK maps a dynamic USDT object): objects were (un)loaded.
 *
 * The walk is a bpf_loop over frames (one callback per frame), each doing two bounded binary
 * searches (range, then row). See walker.h for the table update protocol.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "walker.h"

char LICENSE[] SEC("license") = "GPL";

#define JW_SIGSTOP 19
#define JW_HASH_MUL 0x100000001b3ULL

/* Runtime settings; user space writes them through the skeleton's mmapped .data. */
struct jw_config jw_cfg = {.max_depth = JW_DEFAULT_DEPTH};
/* The newest generation window_publish announced (generations are process-wide and only grow):
 * frames unwound without a table are stamped with it, so user space names them by the code that
 * was published at the time of the sample (docs/jitwalk.md, "Symbolization"). */
__u64 jw_latest_gen = 0;
/* Next address-space id for an exec'd process (0 is the first target's). */
__u64 jw_next_asid = 1;
/* Where recent publications put their code (walker.h, JW_STOP_ROWS_PENDING). */
struct jw_recent jw_recent[JW_RECENT_CAP];

/* ---- maps ---- */

/* The row array is the one inner map of jw_rows, so that user space can replace it with a larger
 * copy when it fills (a process tree mapping more objects than it was sized for): the walker
 * reads the current one at every step. Row indexes never change with the copy. */
struct jw_rows_array {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE | BPF_F_INNER_MAP); /* any size can replace it */
  __uint(max_entries, 1 << 20);                        /* resized by user space before load */
  __type(key, __u32);
  __type(value, struct jw_row);
} jw_rows0 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  __uint(max_entries, 1);
  __type(key, __u32);
  __array(values, struct jw_rows_array);
} jw_rows SEC(".maps") = {
    .values = {[0] = &jw_rows0},
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 2 * JW_RANGE_CAP);
  __type(key, __u32);
  __type(value, struct jw_range);
} jw_ranges SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct jw_ctl);
} jw_ctl SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u64);
  __type(value, struct jw_window_state);
} jw_windows SEC(".maps");

/* Followed processes: tgid -> address space (walker.h, "Process trees"). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, struct jw_task);
} jw_follow SEC(".maps");

/* Threads sampled (tid -> tgid), for the summary's task counts. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, __u32);
} jw_threads SEC(".maps");

/* Walk state: too big for the 512-byte BPF stack. */
struct jw_scratch {
  struct jw_stack st;
  __u64 kfp[JW_KSTACK_DEPTH]; /* bpf_get_stack output of jw_sample_kfp */
  __u64 pc, sp, fp;
  __u64 hash;
  __u64 tag; /* (asid << JW_ASID_SHIFT): the address space searched */
  __u32 active, nranges, max_depth;
  /* Consecutive frames are often in the same object or window (recursion, a library's
   * internal calls): the last range found and its staleness verdict are kept for the walk. */
  __u32 last_range; /* jw_ranges key + 1, 0 = none */
  __u32 last_uid;
  __u32 last_stale;
  __u32 last_row; /* jw_rows key + 1 of the row found for last_row_pc (recursion) */
  __u64 last_row_pc;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct jw_scratch);
} jw_scratch SEC(".maps");

/* Value: the first jw_stack_bytes(max_depth) bytes of a struct jw_stack (size set at load). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 8192); /* resized by user space */
  __uint(key_size, sizeof(__u64));
  __uint(value_size, jw_stack_bytes(JW_DEFAULT_DEPTH));
} jw_stacks SEC(".maps");

/* Checkpoint records are assembled here, then copied out with their actual size. */
struct jw_checkpoint_buf {
  struct jw_checkpoint_event e;
  __u8 data[JW_CHECKPOINT_DATA_MAX];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct jw_checkpoint_buf);
} jw_checkpoint_scratch SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536); /* resized by user space */
  __type(key, struct jw_count_key);
  __type(value, __u64);
} jw_counts SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_STACK_TRACE);
  __uint(max_entries, 16384);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, JW_KSTACK_DEPTH * sizeof(__u64));
} jw_kstacks SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, JW_STAT_COUNT_);
  __type(key, __u32);
  __type(value, __u64);
} jw_stats SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 16 << 20);
} jw_events SEC(".maps");

/* ---- helpers ---- */

static __always_inline void stat_add(__u32 which, __u64 n) {
  __u64* v = bpf_map_lookup_elem(&jw_stats, &which);
  if (v) *v += n; /* per-CPU: no atomics needed */
}

static __always_inline __u32 read_u32(const volatile __u32* p) {
  return *p;
}
static __always_inline __u64 read_u64(const volatile __u64* p) {
  return *p;
}

/* The last range whose start <= pc, if pc < its end. */
static __always_inline struct jw_range* find_range(struct jw_scratch* s, __u64 pc) {
  __u32 n = s->nranges;
  __u32 base = s->active ? JW_RANGE_CAP : 0;
  if (s->last_range) {
    __u32 key = s->last_range - 1;
    struct jw_range* r = bpf_map_lookup_elem(&jw_ranges, &key);
    if (r && pc >= r->start && pc < r->end) return r;
  }
  __u32 lo = 0, hi = n;
  for (int i = 0; i < JW_RANGE_SEARCH_STEPS; i++) {
    if (lo >= hi) break;
    __u32 mid = lo + (hi - lo) / 2;
    __u32 key = base + mid;
    struct jw_range* r = bpf_map_lookup_elem(&jw_ranges, &key);
    if (!r) return NULL;
    if (r->start <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0 || lo > n) return NULL;
  __u32 key = base + lo - 1;
  struct jw_range* r = bpf_map_lookup_elem(&jw_ranges, &key);
  if (!r || pc < r->start || pc >= r->end) return NULL;
  s->last_range = key + 1;
  return r;
}

/* The last row of the range with pc_off <= off in the row array `rows`; its key in *key_out. */
static __always_inline struct jw_row* find_row(void* rows, const struct jw_range* r, __u32 off,
                                               __u32* key_out) {
  __u32 first = r->row_first;
  __u32 lo = 0, hi = r->row_count;
  if (hi > JW_MAX_ROWS_PER_RANGE) return NULL;
  for (int i = 0; i < JW_ROW_SEARCH_STEPS; i++) {
    if (lo >= hi) break;
    __u32 mid = lo + (hi - lo) / 2;
    __u32 key = first + mid;
    struct jw_row* row = bpf_map_lookup_elem(rows, &key);
    if (!row) return NULL;
    if (row->pc_off <= off)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return NULL;
  __u32 key = first + lo - 1;
  *key_out = key;
  return bpf_map_lookup_elem(rows, &key);
}

/* A JIT range is refused once its window was freed (window_free fired for its generation or a
 * later one; the handler records that synchronously). Windows the handlers never saw were loaded
 * from a consistent registry snapshot and are trusted. */
static __always_inline int range_stale(struct jw_scratch* s, const struct jw_range* r) {
  if (r->kind != JW_RANGE_JIT) return 0;
  if (s->last_uid == r->uid) return s->last_stale;
  __u64 id = r->window_id;
  struct jw_window_state* w = bpf_map_lookup_elem(&jw_windows, &id);
  int stale = 0;
  if (w) {
    __u64 freed = w->freed_gen;
    stale = freed != 0 && r->generation <= freed;
  }
  s->last_uid = r->uid;
  s->last_stale = stale;
  return stale;
}

/* Is key_pc in code a recent publication put there (jw_recent) while the walk has no rows of
 * that publication (`r`: the range found for the PC, if any; a range of the same window with
 * that or a newer generation means the PC lies in a gap of loaded rows)? A window freed since
 * does not count: its memory may hold anything now. */
static __always_inline int rows_pending(__u64 key_pc, const struct jw_range* r) {
  for (__u32 i = 0; i < JW_RECENT_CAP; i++) {
    const volatile struct jw_recent* e = &jw_recent[i];
    __u64 gen = e->generation;
    if (gen == 0 || key_pc < e->start || key_pc >= e->end) continue;
    __u64 key = e->window_key;
    if (r && r->kind == JW_RANGE_JIT && r->window_id == key && r->generation >= gen) continue;
    struct jw_window_state* w = bpf_map_lookup_elem(&jw_windows, &key);
    if (w && w->freed_gen >= gen) continue;
    return 1;
  }
  return 0;
}

/* ---- the caller of a frameless leaf (JW_M_SP_RA) ---- */

#define JW_VM_EXEC 0x4 /* include/linux/mm.h */

struct vma_probe {
  __u64 exec;
};

static long vma_is_exec(struct task_struct* task, struct vm_area_struct* vma, struct vma_probe* p) {
  p->exec = (vma->vm_flags & JW_VM_EXEC) != 0;
  return 0;
}

/* Could `ra` be a return address: code in an executable mapping right after a call instruction
 * (call rel32, or call through a register or memory)? */
static __always_inline int return_address(__u64 ra) {
  __u8 b[8];
  if (ra < 8 || (ra >> JW_ASID_SHIFT) || bpf_probe_read_user(b, sizeof(b), (void*)(ra - 8)))
    return 0;
  if (!jw_ends_with_call(b)) return 0;
  struct vma_probe p = {};
  if (bpf_find_vma(bpf_get_current_task_btf(), ra, vma_is_exec, &p, 0)) return 0;
  return p.exec != 0;
}

static __always_inline void mix(struct jw_scratch* s, __u64 v) {
  s->hash = (s->hash ^ v) * JW_HASH_MUL;
}

/* Ends the walk at frame d. `tried`: the method of the step that failed there (enum jw_method),
 * 0 when no step was due (a table's outermost row). */
static __always_inline void finish(struct jw_scratch* s, __u32 d, __u8 stop, __u32 meta,
                                   __u8 tried) {
  if (d < JW_MAX_DEPTH) s->st.frames[d].meta = meta;
  s->st.stop = stop;
  s->st.end_method = tried;
  mix(s, meta);
  mix(s, tried);
}

/* One frame: record the PC, find how to reach the caller, step. 0 = continue, 1 = stop. */
struct walk_ctx {
  struct jw_scratch* s;
  __u32 fp_only;
};

static long walk_step(__u32 index, struct walk_ctx* c) {
  struct jw_scratch* s = c->s;
  if (!s) return 1;
  __u32 d = s->st.depth;
  if (d >= JW_MAX_DEPTH || d >= s->max_depth) {
    s->st.stop = JW_STOP_DEPTH;
    return 1;
  }
  __u64 pc = s->pc, sp = s->sp, fp = s->fp;
  s->st.frames[d].pc = pc;
  s->st.frames[d].stamp = 0;
  s->st.depth = d + 1;
  mix(s, pc);

  /* A return address may point just past the calling function (call as its last
   * instruction): look callers up at pc - 1. */
  __u64 lookup_pc = d == 0 ? pc : pc - 1;
  __u32 method = JW_M_FP, kind = JW_RANGE_NONE, uid = 0;
  __u64 cfa = 0, ra = 0, new_fp = fp;

  /* Ranges are searched by (asid << JW_ASID_SHIFT) | pc; a PC above the user range has none. */
  __u64 key_pc = (lookup_pc >> JW_ASID_SHIFT) ? 0 : lookup_pc | s->tag;
  struct jw_range* r = c->fp_only || !key_pc ? NULL : find_range(s, key_pc);
  if (r) {
    kind = r->kind;
    uid = r->uid;
    if (range_stale(s, r)) {
      method = JW_M_FP_STALE;
      s->st.stale++;
      stat_add(JW_STAT_STALE_REJECT, 1);
    } else {
      struct jw_row* row = NULL;
      __u32 zero = 0;
      void* rows = bpf_map_lookup_elem(&jw_rows, &zero);
      if (!rows) {
        finish(s, d, JW_STOP_READ, JW_META(JW_M_END, kind, uid), JW_M_TABLE);
        return 1;
      }
      if (s->last_row && s->last_row_pc == lookup_pc) {
        __u32 key = s->last_row - 1;
        row = bpf_map_lookup_elem(rows, &key);
      } else {
        __u32 key = 0;
        row = find_row(rows, r, (__u32)(key_pc - r->start), &key);
        if (row) {
          s->last_row = key + 1;
          s->last_row_pc = lookup_pc;
        }
      }
      if (row && row->kind == JW_ROW_OUTERMOST) {
        finish(s, d, JW_STOP_OUTERMOST, JW_META(JW_M_END, kind, uid), 0);
        return 1;
      }
      if (row && row->kind == JW_ROW_UNSUPPORTED) {
        finish(s, d, JW_STOP_UNSUPPORTED_RULE, JW_META(JW_M_END, kind, uid), JW_M_TABLE);
        return 1;
      }
      if (row && (row->flags & JW_ROW_FROM_EH_FRAME)) kind = JW_RANGE_EHFRAME;
      if (row && (row->kind == JW_ROW_CFA_SP || row->kind == JW_ROW_CFA_FP)) {
        method = JW_M_TABLE;
        __u8 flags = row->flags;
        cfa = (row->kind == JW_ROW_CFA_SP ? sp : fp) + (__s64)row->cfa_off;
        /* v3: CFA = *(base + offset), e.g. *(rbp - 8) after a stack realignment. */
        if ((flags & JW_ROW_CFA_DEREF) && bpf_probe_read_user(&cfa, sizeof(cfa), (void*)cfa)) {
          finish(s, d, JW_STOP_READ, JW_META(JW_M_END, kind, uid), method);
          return 1;
        }
        if (cfa <= sp || (cfa & 7)) {
          finish(s, d, JW_STOP_NO_PROGRESS, JW_META(JW_M_END, kind, uid), method);
          return 1;
        }
        /* One read for the RA and, when it sits right below it (push rbp at entry: the
         * common case), the saved FP. */
        int fp_saved = flags & JW_ROW_FP_SAVED;
        __s32 fp_off = row->fp_off;
        __s64 ra_off = (flags & JW_ROW_RA_OFF) ? (__s64)row->ra_off : -8;
        __u64 fp_at = (flags & JW_ROW_FP_AT_FP)   ? fp + (__s64)fp_off
                      : (flags & JW_ROW_FP_AT_SP) ? sp + (__s64)fp_off
                                                  : cfa + (__s64)fp_off;
        if (fp_saved && fp_at == cfa - 16 && ra_off == -8) {
          __u64 pair[2];
          if (bpf_probe_read_user(pair, sizeof(pair), (void*)(cfa - 16))) {
            finish(s, d, JW_STOP_READ, JW_META(JW_M_END, kind, uid), method);
            return 1;
          }
          new_fp = pair[0];
          ra = pair[1];
        } else {
          if (bpf_probe_read_user(&ra, sizeof(ra), (void*)(cfa + ra_off))) {
            finish(s, d, JW_STOP_READ, JW_META(JW_M_END, kind, uid), method);
            return 1;
          }
          if (fp_saved && bpf_probe_read_user(&new_fp, sizeof(new_fp), (void*)fp_at)) {
            finish(s, d, JW_STOP_READ, JW_META(JW_M_END, kind, uid), method);
            return 1;
          }
        }
      } else {
        method = JW_M_FP_GAP;
      }
    }
  }

  if (method != JW_M_TABLE) {
    /* No usable rows for this PC (none, a gap, a freed window's): the code there may be newer
     * than any table, so the frame carries the publication it must be named by. */
    __u32 stamp = (__u32)jw_latest_gen;
    s->st.frames[d].stamp = stamp;
    mix(s, stamp);
    if (jw_cfg.jit_rows && !c->fp_only && key_pc && rows_pending(key_pc, r)) {
      finish(s, d, JW_STOP_ROWS_PENDING, JW_META(JW_M_END, kind, uid), method);
      return 1;
    }
    s->st.fallback = 1;
    /* The interrupted frame: a leaf without rows may not have a frame of its own (a runtime's
     * helper stub, V8's builtins): rbp is still its caller's, so [fp + 8] would skip that
     * caller. Its return address is then at SP (or SP + 8 right after `push rbp`, when [SP] is
     * the caller's rbp), and is used if it is one. */
    __u64 top[2];
    if (d == 0 && !c->fp_only && (fp == 0 || fp >= sp + 8) &&
        bpf_probe_read_user(top, sizeof(top), (void*)sp) == 0) {
      int pushed = top[0] == fp && fp != 0;
      __u64 cand = pushed ? top[1] : top[0];
      if (return_address(cand)) {
        method = JW_M_SP_RA;
        ra = cand;
        cfa = sp + (pushed ? 16 : 8);
        new_fp = fp;
        goto step;
      }
    }
    /* Frame-pointer fallback: [fp] = caller's fp, [fp + 8] = return address. */
    if (fp == 0) {
      finish(s, d, JW_STOP_FP_END, JW_META(JW_M_END, kind, uid), method);
      return 1;
    }
    if (fp < sp || (fp & 7)) {
      finish(s, d, JW_STOP_BAD_FP, JW_META(JW_M_END, kind, uid), method);
      return 1;
    }
    __u64 pair[2];
    if (bpf_probe_read_user(pair, sizeof(pair), (void*)fp)) {
      finish(s, d, JW_STOP_READ, JW_META(JW_M_END, kind, uid), method);
      return 1;
    }
    new_fp = pair[0];
    ra = pair[1];
    cfa = fp + 16;
  }

step:
  if (cfa <= sp) {
    finish(s, d, JW_STOP_NO_PROGRESS, JW_META(JW_M_END, kind, uid), method);
    return 1;
  }
  if (ra == 0) {
    finish(s, d, JW_STOP_RA_ZERO, JW_META(JW_M_END, kind, uid), method);
    return 1;
  }
  __u32 meta = JW_META(method, kind, uid);
  s->st.frames[d].meta = meta;
  mix(s, meta);
  s->pc = ra;
  s->sp = cfa;
  s->fp = new_fp;
  return 0;
}

/* Walks from the given user registers into the per-CPU scratch. Returns the scratch (with
 * st.stop set) or NULL if the scratch is unavailable. */
static __always_inline struct jw_scratch* walk_user(__u64 pc, __u64 sp, __u64 fp, __u32 asid) {
  __u32 zero = 0;
  struct jw_scratch* s = bpf_map_lookup_elem(&jw_scratch, &zero);
  struct jw_ctl* c = bpf_map_lookup_elem(&jw_ctl, &zero);
  if (!s || !c) return NULL;
  __u32 active = read_u32(&c->active) & 1;
  __u64 seq = read_u64(&c->seq[active]);
  s->active = active;
  s->nranges = read_u32(&c->nranges[active]);
  if (s->nranges > JW_RANGE_CAP) s->nranges = 0;
  s->max_depth = jw_cfg.max_depth;
  s->pc = pc;
  s->sp = sp;
  s->fp = fp;
  s->hash = 0xcbf29ce484222325ULL;
  s->tag = (__u64)asid << JW_ASID_SHIFT;
  /* Equal PCs in two address spaces are different code: their stacks never share a hash. */
  if (asid) mix(s, asid);
  s->st.depth = 0;
  s->st.stop = JW_STOP_DEPTH;
  s->st.fallback = 0;
  s->st.end_method = 0;
  s->st.stale = 0;
  s->last_range = 0;
  s->last_uid = 0;
  s->last_stale = 0;
  s->last_row = 0;
  s->last_row_pc = 0;
  struct walk_ctx wc = {.s = s, .fp_only = jw_cfg.fp_only};
  bpf_loop(JW_MAX_DEPTH, walk_step, &wc, 0);
  if (s->st.depth > JW_MAX_DEPTH) s->st.depth = JW_MAX_DEPTH;
  if (read_u64(&c->seq[active]) != seq) {
    s->st.stop = JW_STOP_TABLE_RACE;
    stat_add(JW_STAT_RACES, 1);
  }
  mix(s, s->st.stop);
  stat_add(JW_STAT_FRAMES, s->st.depth);
  if (s->st.fallback) stat_add(JW_STAT_FP_FRAMES, 1);
  return s;
}

/* The current process's entry if it is followed (the target or, with follow_children, one of
 * its descendants), else NULL. */
static __always_inline struct jw_task* followed(void) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (tgid == 0) return NULL;
  return bpf_map_lookup_elem(&jw_follow, &tgid);
}

static __always_inline int is_target(void) {
  return followed() != NULL;
}

/* jw_windows key of a window of the current process. */
static __always_inline __u64 window_key(__u64 id) {
  struct jw_task* t = followed();
  return t ? id ^ ((__u64)t->asid << JW_WINDOW_ASID_SHIFT) : id;
}

static __always_inline void count_thread(void) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tid = (__u32)id, tgid = id >> 32;
  if (!bpf_map_lookup_elem(&jw_threads, &tid))
    bpf_map_update_elem(&jw_threads, &tid, &tgid, BPF_NOEXIST);
}

static __always_inline void aggregate(void* ctx, __u64 hash, const struct jw_stack* st,
                                      __u32 asid) {
  __u64 id = bpf_get_current_pid_tgid();
  struct jw_count_key key = {};
  key.ustack = hash;
  key.tgid = id >> 32;
  key.tid = jw_cfg.per_thread ? (__u32)id : 0;
  key.asid = asid;
  count_thread();
  key.kstack = jw_cfg.kernel_stacks ? bpf_get_stackid(ctx, &jw_kstacks, 0) : -1;

  __u64* count = bpf_map_lookup_elem(&jw_counts, &key);
  if (count) {
    __sync_fetch_and_add(count, 1);
    stat_add(JW_STAT_STORED, 1);
    return;
  }
  long err = bpf_map_update_elem(&jw_stacks, &hash, st, BPF_NOEXIST);
  if (err && err != -17 /* EEXIST */) {
    stat_add(JW_STAT_DROPPED_MAP, 1);
    return;
  }
  __u64 one = 1;
  if (bpf_map_update_elem(&jw_counts, &key, &one, BPF_NOEXIST)) {
    count = bpf_map_lookup_elem(&jw_counts, &key);
    if (!count) {
      stat_add(JW_STAT_DROPPED_MAP, 1);
      return;
    }
    __sync_fetch_and_add(count, 1);
  }
  stat_add(JW_STAT_STORED, 1);
}

/* The user registers of the interrupted task: the sample's own registers when it hit user
 * mode, otherwise those saved at kernel entry. Kernel addresses have the top bit set on
 * x86-64, so the sign of the IP tells the mode without reading CS (whose pt_regs layout
 * changed with FRED). */
static __always_inline int user_regs(struct bpf_perf_event_data* ctx, __u64* pc, __u64* sp,
                                     __u64* fp) {
  if ((__s64)ctx->regs.ip > 0) {
    *pc = ctx->regs.ip;
    *sp = ctx->regs.sp;
    *fp = ctx->regs.bp;
    return 0;
  }
  struct task_struct* task = bpf_get_current_task_btf();
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  if (!regs) return -1;
  *pc = BPF_CORE_READ(regs, ip);
  *sp = BPF_CORE_READ(regs, sp);
  *fp = BPF_CORE_READ(regs, bp);
  return *pc == 0 ? -1 : 0;
}

#define JW_PF_EXITING 0x00000004 /* include/linux/sched.h: the task is in do_exit */

/* The task a perf event sampled, counted as a sample if jitwalk follows it, else counted as
 * another task's (or an exiting one's, JW_STAT_EXITING) and NULL. */
static __always_inline struct jw_task* sampled_task(void) {
  struct jw_task* t = followed();
  if (!t) {
    struct task_struct* task = bpf_get_current_task_btf();
    stat_add(BPF_CORE_READ(task, flags) & JW_PF_EXITING ? JW_STAT_EXITING : JW_STAT_OTHER_TASK,
             1);
    return NULL;
  }
  stat_add(JW_STAT_SAMPLES, 1);
  return t;
}

/* ---- programs ---- */

SEC("perf_event")
int jw_sample(struct bpf_perf_event_data* ctx) {
  struct jw_task* t = sampled_task();
  if (!t) return 0;
  __u32 asid = t->asid;
  __u64 t0 = bpf_ktime_get_ns();
  __u64 pc, sp, fp;
  if (user_regs(ctx, &pc, &sp, &fp)) return 0;
  struct jw_scratch* s = walk_user(pc, sp, fp, asid);
  if (s && s->st.stop != JW_STOP_TABLE_RACE) aggregate(ctx, s->hash, &s->st, asid);
  stat_add(JW_STAT_WALK_NS, bpf_ktime_get_ns() - t0);
  return 0;
}

SEC("perf_event")
int jw_sample_kfp(struct bpf_perf_event_data* ctx) {
  struct jw_task* t = sampled_task();
  if (!t) return 0;
  __u32 asid = t->asid;
  __u64 t0 = bpf_ktime_get_ns();
  __u32 zero = 0;
  struct jw_scratch* s = bpf_map_lookup_elem(&jw_scratch, &zero);
  if (!s) return 0;
  long n = bpf_get_stack(ctx, s->kfp, sizeof(s->kfp), BPF_F_USER_STACK);
  if (n < 0) return 0;
  __u32 depth = (__u32)n / 8;
  if (depth > JW_KSTACK_DEPTH) depth = JW_KSTACK_DEPTH;
  __u64 hash = 0xcbf29ce484222325ULL;
  for (__u32 i = 0; i < JW_KSTACK_DEPTH; i++) {
    if (i >= depth) break;
    __u64 pc = s->kfp[i];
    hash = (hash ^ pc) * JW_HASH_MUL;
    s->st.frames[i].pc = pc;
    s->st.frames[i].meta = JW_META(JW_M_FP, 0, 0);
  }
  s->st.depth = depth;
  s->st.stop = depth == JW_KSTACK_DEPTH ? JW_STOP_DEPTH : JW_STOP_FP_END;
  s->st.fallback = 1;
  s->st.end_method = 0;
  s->st.stale = 0;
  hash ^= 0x6b6670; /* keep kernel-FP stacks apart from walked ones */
  if (asid) hash = (hash ^ asid) * JW_HASH_MUL;
  aggregate(ctx, hash, &s->st, asid);
  stat_add(JW_STAT_WALK_NS, bpf_ktime_get_ns() - t0);
  return 0;
}

static __always_inline void fill_header(struct jw_event_header* h, __u32 type) {
  __u64 id = bpf_get_current_pid_tgid();
  h->type = type;
  h->tgid = id >> 32;
  h->tid = (__u32)id;
  h->stopped = 0;
  h->time_ns = bpf_ktime_get_ns();
}

SEC("usdt")
int jw_checkpoint(struct pt_regs* ctx) {
  struct jw_task* t = followed();
  if (!t) return 0;
  __u32 asid = t->asid;
  stat_add(JW_STAT_CHECKPOINTS, 1);
  long tag = 0, count = 0, addrs = 0;
  bpf_usdt_arg(ctx, 0, &tag);
  bpf_usdt_arg(ctx, 1, &count);
  bpf_usdt_arg(ctx, 2, &addrs);

  __u32 zero = 0;
  struct jw_checkpoint_buf* b = bpf_map_lookup_elem(&jw_checkpoint_scratch, &zero);
  if (!b) return 0;
  fill_header(&b->e.h, JW_EV_CHECKPOINT);
  b->e.tag = tag;
  b->e.truth_count = count;
  b->e.truth_addr = addrs;
  b->e.truth_read_err = 0;
  b->e.truth_n = 0;

  /* data: truth[truth_n], then the kernel's frame-pointer walk, then our walk. */
  __u32 off = 0;
  __u64 n = (__u64)count;
  if (n > JW_MAX_TRUTH) {
    b->e.truth_read_err = -7; /* E2BIG: the protocol caps the array */
  } else if (n > 0) {
    __u32 bytes = (__u32)n * 8;
    if (bytes > 8 * JW_MAX_TRUTH) bytes = 8 * JW_MAX_TRUTH;
    b->e.truth_read_err = bpf_probe_read_user(b->data, bytes, (void*)addrs);
    if (b->e.truth_read_err == 0) {
      b->e.truth_n = (__u32)n;
      off = bytes;
    }
  }

  if (off > 8 * JW_MAX_TRUTH) off = 8 * JW_MAX_TRUTH;
  long fp = bpf_get_stack(ctx, b->data + off, 8 * JW_KSTACK_DEPTH, BPF_F_USER_STACK);
  b->e.fp_err = fp < 0 ? (__s32)fp : 0;
  __u32 fp_n = fp > 0 ? (__u32)fp / 8 : 0;
  if (fp_n > JW_KSTACK_DEPTH) fp_n = JW_KSTACK_DEPTH;
  b->e.fp_n = fp_n;
  off += fp_n * 8;

  struct jw_scratch* s = walk_user(PT_REGS_IP(ctx), PT_REGS_SP(ctx), PT_REGS_FP(ctx), asid);
  __u32 depth = 0;
  if (s) {
    depth = s->st.depth;
    if (depth > JW_MAX_DEPTH) depth = JW_MAX_DEPTH;
    b->e.walk_stop = s->st.stop;
    b->e.walk_fallback = s->st.fallback;
    b->e.walk_stale = s->st.stale;
    b->e.walk_end_method = s->st.end_method;
    if (off > 8 * (JW_MAX_TRUTH + JW_KSTACK_DEPTH)) off = 8 * (JW_MAX_TRUTH + JW_KSTACK_DEPTH);
    __u32 bytes = depth * 16;
    if (bytes > 16 * JW_MAX_DEPTH) bytes = 16 * JW_MAX_DEPTH;
    if (bytes) bpf_probe_read_kernel(b->data + off, bytes, s->st.frames);
    off += bytes;
  } else {
    b->e.walk_stop = JW_STOP_NO_USER;
    b->e.walk_fallback = 0;
    b->e.walk_stale = 0;
    b->e.walk_end_method = 0;
  }
  __builtin_memset(b->e.reserved, 0, sizeof(b->e.reserved));
  b->e.walk_depth = depth;
  __u64 size = sizeof(b->e) + off;
  if (size > sizeof(*b)) size = sizeof(*b);
  if (bpf_ringbuf_output(&jw_events, b, size, 0)) stat_add(JW_STAT_RINGBUF_FULL, 1);
  return 0;
}

/* Window state updates happen here, synchronously with the runtime, so that a retired window's
 * rows are refused before the runtime can reuse its memory. */
SEC("usdt")
int BPF_USDT(jw_window_publish, __u64 id, __u64 generation, __u64 text, __u64 text_len,
             __u64 sframe, __u64 sframe_len) {
  if (!is_target()) return 0;
  stat_add(JW_STAT_EVENTS, 1);
  __u64 latest = jw_latest_gen;
  if (generation > latest) __sync_val_compare_and_swap(&jw_latest_gen, latest, generation);
  __u64 key = window_key(id);
  struct jw_window_state* w = bpf_map_lookup_elem(&jw_windows, &key);
  if (w) {
    w->published_gen = generation;
  } else {
    struct jw_window_state fresh = {.published_gen = generation};
    bpf_map_update_elem(&jw_windows, &key, &fresh, BPF_ANY);
  }
  if (jw_cfg.jit_rows && text_len != 0) {
    /* Fibonacci hashing spreads any arithmetic sequence of generations over the slots. */
    __u32 slot = (__u32)((generation * 0x9E3779B97F4A7C15ULL) >> 58) & (JW_RECENT_CAP - 1);
    struct jw_task* t = followed();
    __u64 tag = t ? (__u64)t->asid << JW_ASID_SHIFT : 0;
    volatile struct jw_recent* e = &jw_recent[slot];
    e->generation = 0;
    e->start = text | tag;
    e->end = (text + text_len) | tag;
    e->window_key = key;
    e->generation = generation;
  }
  struct jw_window_event* e = bpf_ringbuf_reserve(&jw_events, sizeof(*e), 0);
  if (!e) {
    stat_add(JW_STAT_RINGBUF_FULL, 1);
    return 0;
  }
  fill_header(&e->h, JW_EV_WINDOW_PUBLISH);
  e->id = id;
  e->generation = generation;
  e->text = text;
  e->text_len = text_len;
  e->sframe = sframe;
  e->sframe_len = sframe_len;
  /* Stop only when user space is sure to hear about it (the event was reserved). */
  if (jw_cfg.stop_on_publish && bpf_send_signal(JW_SIGSTOP) == 0) {
    e->h.stopped = 1;
    stat_add(JW_STAT_STOPS, 1);
  }
  bpf_ringbuf_submit(e, 0);
  return 0;
}

static __always_inline int window_event(__u32 type, __u64 id, __u64 generation) {
  __u64 key = window_key(id);
  struct jw_window_state* w = bpf_map_lookup_elem(&jw_windows, &key);
  if (!w) {
    struct jw_window_state fresh = {};
    bpf_map_update_elem(&jw_windows, &key, &fresh, BPF_NOEXIST);
    w = bpf_map_lookup_elem(&jw_windows, &key);
  }
  if (w) {
    __u64* slot = type == JW_EV_WINDOW_FREE ? &w->freed_gen : &w->retired_gen;
    /* Generations only grow; a racing older event must not lower the mark. */
    __u64 old = *slot;
    if (generation > old) __sync_val_compare_and_swap(slot, old, generation);
  }
  struct jw_window_event* e = bpf_ringbuf_reserve(&jw_events, sizeof(*e), 0);
  if (!e) {
    stat_add(JW_STAT_RINGBUF_FULL, 1);
    return 0;
  }
  fill_header(&e->h, type);
  e->id = id;
  e->generation = generation;
  e->text = e->text_len = e->sframe = e->sframe_len = 0;
  bpf_ringbuf_submit(e, 0);
  return 0;
}

SEC("usdt")
int BPF_USDT(jw_window_retire, __u64 id, __u64 generation) {
  if (!is_target()) return 0;
  stat_add(JW_STAT_EVENTS, 1);
  return window_event(JW_EV_WINDOW_RETIRE, id, generation);
}

/* The window's memory is about to be reused or unmapped: from now on its rows are refused. */
SEC("usdt")
int BPF_USDT(jw_window_free, __u64 id, __u64 generation) {
  if (!is_target()) return 0;
  stat_add(JW_STAT_EVENTS, 1);
  return window_event(JW_EV_WINDOW_FREE, id, generation);
}

SEC("usdt")
int BPF_USDT(jw_code_add, __u64 addr, __u64 size, __u64 name, __u64 window_id,
             __u64 generation) {
  if (!is_target()) return 0;
  stat_add(JW_STAT_EVENTS, 1);
  struct jw_code_event* e = bpf_ringbuf_reserve(&jw_events, sizeof(*e), 0);
  if (!e) {
    stat_add(JW_STAT_RINGBUF_FULL, 1);
    return 0;
  }
  fill_header(&e->h, JW_EV_CODE_ADD);
  e->addr = addr;
  e->size = size;
  e->window_id = window_id;
  e->generation = generation; /* 0 from an SDK older than this argument */
  if (bpf_probe_read_user_str(e->name, sizeof(e->name), (void*)name) < 0) e->name[0] = 0;
  bpf_ringbuf_submit(e, 0);
  return 0;
}

SEC("uprobe")
int jw_loader(struct pt_regs* ctx) {
  if (!is_target()) return 0;
  stat_add(JW_STAT_EVENTS, 1);
  struct jw_event_header* e = bpf_ringbuf_reserve(&jw_events, sizeof(*e), 0);
  if (!e) {
    stat_add(JW_STAT_RINGBUF_FULL, 1);
    return 0;
  }
  fill_header(e, JW_EV_LOADER);
  if (jw_cfg.stop_on_loader && bpf_send_signal(JW_SIGSTOP) == 0) {
    e->stopped = 1;
    stat_add(JW_STAT_STOPS, 1);
  }
  bpf_ringbuf_submit(e, 0);
  return 0;
}

/* ---- process trees (walker.h, "Process trees") ---- */

static __always_inline void task_event(__u32 type, __u32 tgid, __u32 parent, __u32 asid,
                                       int stop) {
  struct jw_task_event* e = bpf_ringbuf_reserve(&jw_events, sizeof(*e), 0);
  if (!e) {
    stat_add(JW_STAT_RINGBUF_FULL, 1);
    return;
  }
  fill_header(&e->h, type);
  e->h.tgid = tgid;
  e->parent_tgid = parent;
  e->asid = asid;
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  if (stop && bpf_send_signal(JW_SIGSTOP) == 0) {
    e->h.stopped = 1;
    stat_add(JW_STAT_STOPS, 1);
  }
  bpf_ringbuf_submit(e, 0);
}

/* A new process (not a thread) of a followed one shares its address space until it execs. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(jw_fork, struct task_struct* parent, struct task_struct* child) {
  if (!jw_cfg.follow_children) return 0;
  __u32 pid = BPF_CORE_READ(child, pid), tgid = BPF_CORE_READ(child, tgid);
  if (pid != tgid) return 0; /* a thread */
  __u32 ptgid = BPF_CORE_READ(parent, tgid);
  struct jw_task* p = bpf_map_lookup_elem(&jw_follow, &ptgid);
  if (!p) return 0;
  struct jw_task t = {.asid = p->asid, .flags = 0};
  if (bpf_map_update_elem(&jw_follow, &tgid, &t, BPF_ANY)) return 0;
  stat_add(JW_STAT_EVENTS, 1);
  /* The event's comm is the parent's (the child has not run yet). */
  task_event(JW_EV_FORK, tgid, ptgid, t.asid, 0);
  return 0;
}

/* A followed process exec'd: a new address space, which user space fills with the new image's
 * tables. A command jitwalk started is stopped here (like at loader events) until its probes
 * and first tables are in place. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(jw_exec, struct task_struct* p, pid_t old_pid, struct linux_binprm* bprm) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  struct jw_task* t = bpf_map_lookup_elem(&jw_follow, &tgid);
  if (!t) return 0;
  if (t->flags & JW_TASK_SKIP_EXEC) {
    t->flags &= ~JW_TASK_SKIP_EXEC;
    return 0;
  }
  /* Take the next id (compare-and-swap: this clang cannot use fetch-and-add's result). */
  __u64 next = jw_next_asid;
  for (int i = 0; i < 16; i++) {
    __u64 seen = __sync_val_compare_and_swap(&jw_next_asid, next, next + 1);
    if (seen == next) break;
    next = seen;
  }
  __u32 asid = next >= JW_ASID_NONE ? JW_ASID_NONE : (__u32)next;
  t->asid = asid;
  stat_add(JW_STAT_EVENTS, 1);
  task_event(JW_EV_EXEC, tgid, 0, asid, jw_cfg.stop_on_loader);
  return 0;
}

/* The last thread of a followed process exits: it is no longer followed (its PID may be
 * reused). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(jw_exit, struct task_struct* p) {
  __u32 tgid = BPF_CORE_READ(p, tgid);
  struct jw_task* t = bpf_map_lookup_elem(&jw_follow, &tgid);
  if (!t) return 0;
  if (BPF_CORE_READ(p, signal, live.counter) != 0) return 0; /* other threads still run */
  __u32 asid = t->asid;
  bpf_map_delete_elem(&jw_follow, &tgid);
  stat_add(JW_STAT_EVENTS, 1);
  task_event(JW_EV_EXIT, tgid, 0, asid, 0);
  return 0;
}
