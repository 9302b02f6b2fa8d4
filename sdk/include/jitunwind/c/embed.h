/* jitunwind/c/embed.h — the C API a runtime embeds: errors and versions, frame rows, the one-call
 * on-ramp, sessions and code windows with their publishers.
 *
 * The other C headers, by audience: c/tooling.h (SFrame codec and unwinder, remote registry
 * reader: for tools), c/usdt.h (dynamic USDT probes), c/trampolines.h (interpreter
 * trampolines); jitunwind/jitunwind.h includes them all.
 *
 * Conventions (every function below follows them):
 * - Objects are opaque handles made by `jitunwind_<thing>_create` and released by
 *   `jitunwind_<thing>_destroy` (which accepts NULL). A handle is used by one thread at a time
 *   unless its section says otherwise.
 * - Fallible functions return a `jitunwind_status` (0 = success, otherwise the negated C++
 *   `errc`) and take an optional `jitunwind_error*` that receives the message. Nothing throws,
 *   nothing prints.
 * - Names: `jitunwind_<object>_<verb>` (jitunwind_session_poll, jitunwind_window_publish) and
 *   `jitunwind_<object>_<property>` for accessors (jitunwind_window_id, _text_start);
 *   jitunwind_window_get_state keeps `get_` because jitunwind_window_state is its enum's name.
 *   The frame builder's directives are `jitunwind_frame_<DWARF directive>` and its recipes
 *   `jitunwind_frame_recipe_<shape>`. Functions added after the release that started this
 *   ABI generation (0.2) say "Since JITUNWIND_0.N" (their symbol version).
 * - Callbacks receive the `void* user` they were registered with.
 * - Memory returned to the caller says in its comment who frees it and how.
 * - Options structs start with `uint32_t struct_size`: fill one with its `_init` function
 *   (which sets struct_size and the documented defaults), then change what you need. NULL
 *   means the defaults; a struct whose struct_size is 0 (zeroed, never initialised) is refused
 *   with JITUNWIND_E_INVALID_ARGUMENT naming the `_init` function. A library newer than the
 *   caller gives the fields the caller's struct_size does not cover their defaults
 *   (docs/c-api.md, "Options structs").
 */
#ifndef JITUNWIND_C_EMBED_H
#define JITUNWIND_C_EMBED_H

#include <jitunwind/config.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== common ============================================================================== */

typedef enum jitunwind_status {
  JITUNWIND_OK = 0,
  JITUNWIND_E_INVALID_ARGUMENT = -1,
  JITUNWIND_E_MALFORMED = -2,
  JITUNWIND_E_OUT_OF_RANGE = -3,
  JITUNWIND_E_UNSUPPORTED = -4,
  JITUNWIND_E_IO = -5,
  JITUNWIND_E_PERMISSION_DENIED = -6,
  JITUNWIND_E_NOT_FOUND = -7,
  JITUNWIND_E_ALREADY_EXISTS = -8,
  JITUNWIND_E_BAD_STATE = -9,
  JITUNWIND_E_NO_MEMORY = -10,
  JITUNWIND_E_LIMIT_EXCEEDED = -11
} jitunwind_status;

/* Receives the message of a failed call (always NUL-terminated, truncated if longer). */
typedef struct jitunwind_error {
  jitunwind_status status;
  char message[512];
} jitunwind_error;

/* Stable name of a status ("ok", "invalid_argument", ...). */
JITUNWIND_API const char* jitunwind_status_string(jitunwind_status status);

/* The version of the library actually loaded, as JITUNWIND_VERSION (MAJOR * 10000 + MINOR * 100
   + PATCH) and as "MAJOR.MINOR.PATCH". A program can compare it with the JITUNWIND_VERSION of
   the headers it was built with (jitunwind/config.h). */
JITUNWIND_API int jitunwind_version(void);
JITUNWIND_API const char* jitunwind_version_string(void);

/* ==== frame (jitunwind/frame.h) =========================================================== */

/* Target ABI; the values are SFrame's ABI/arch identifiers. */
typedef enum jitunwind_abi {
  JITUNWIND_ABI_AARCH64_BE = 1,
  JITUNWIND_ABI_AARCH64_LE = 2,
  JITUNWIND_ABI_AMD64 = 3
} jitunwind_abi;

/* Registers the frame directives talk about: rsp/sp, rbp/x29, and the return address (x30). */
typedef enum jitunwind_reg {
  JITUNWIND_REG_SP = 0,
  JITUNWIND_REG_FP = 1,
  JITUNWIND_REG_RA = 2
} jitunwind_reg;

/* Rule kinds of jitunwind_frame_row (the values of jitunwind::cfa_base, ra_rule, fp_rule). The
   register rules (CFA from another register, RA or FP taken from a register) need SFrame v3
   (a flexible FDE) and name their register in the row's cfa_reg, ra_reg or fp_reg. */
enum {
  JITUNWIND_CFA_SP = 0,
  JITUNWIND_CFA_FP = 1,
  JITUNWIND_CFA_REG = 2 /* CFA = cfa_reg + cfa_offset (e.g. r10 under a DRAP prologue) */
};
enum {
  JITUNWIND_RA_SAVED = 0,          /* at CFA + ra_offset */
  JITUNWIND_RA_IN_REGISTER = 1,    /* AArch64: still in the link register */
  JITUNWIND_RA_UNDEFINED = 2,      /* outermost frame */
  JITUNWIND_RA_REGISTER_VALUE = 3, /* RA = ra_reg + ra_offset (normally 0) */
  JITUNWIND_RA_REGISTER_SAVED = 4  /* RA at *(ra_reg + ra_offset) */
};
enum {
  JITUNWIND_FP_UNCHANGED = 0,      /* still in the FP register */
  JITUNWIND_FP_SAVED = 1,          /* at CFA + fp_offset */
  JITUNWIND_FP_REGISTER_VALUE = 2, /* FP = fp_reg + fp_offset */
  JITUNWIND_FP_REGISTER_SAVED = 3  /* FP at *(fp_reg + fp_offset) */
};

/* One row of unwind rules (C mirror of jitunwind::frame_row): from `pc_offset` on,
   CFA = base + cfa_offset (base: SP, FP or register cfa_reg, as cfa_base says; with cfa_deref
   1, CFA = *(base + cfa_offset), e.g. CFA = *(rbp - 8) in a stack-realigning prologue); the
   return address and the caller's FP as ra_rule and fp_rule say. Registers are DWARF numbers
   (AMD64: rax 0, rdx 1, rcx 2, rbx 3, rsi 4, rdi 5, rbp 6, rsp 7, r8-r15 8-15; AArch64: x0-x30
   0-30, sp 31); a register field is 0 unless its rule names a register. A row whose register
   fields are all 0 is one SFrame v2 can hold. Rows are array elements: the struct never grows;
   `reserved` is 0 (a row with a non-zero reserved field is refused: a later release may give
   it a meaning). */
typedef struct jitunwind_frame_row {
  uint32_t pc_offset;
  uint8_t cfa_base;   /* JITUNWIND_CFA_* */
  uint8_t ra_rule;    /* JITUNWIND_RA_* */
  uint8_t fp_rule;    /* JITUNWIND_FP_* */
  uint8_t ra_mangled; /* AArch64 pointer authentication: the saved RA is signed */
  uint8_t cfa_reg;    /* with JITUNWIND_CFA_REG */
  uint8_t cfa_deref;  /* 0 or 1 */
  uint8_t ra_reg;     /* with JITUNWIND_RA_REGISTER_* */
  uint8_t fp_reg;     /* with JITUNWIND_FP_REGISTER_* */
  int32_t cfa_offset;
  int32_t ra_offset;
  int32_t fp_offset;
  uint32_t reserved[2]; /* 0 */
} jitunwind_frame_row;

/* Where a callee-saved register other than SP, FP and RA holds the caller's value
   (jitunwind::saved_rule). */
typedef enum jitunwind_saved_rule {
  JITUNWIND_SAVED_AT_CFA = 0,    /* in memory at CFA + cfa_offset */
  JITUNWIND_SAVED_UNCHANGED = 1, /* back in the register (the entry rule) */
  JITUNWIND_SAVED_UNDEFINED = 2  /* not recoverable here */
} jitunwind_saved_rule;

/* From `pc_offset` on, register `dwarf_reg` of the caller is found as `rule` says (C mirror of
   jitunwind::saved_register; AMD64: rbx 3, r12-r15 12-15; AArch64: x19-x28 19-28, d8-d15
   72-79). The `.eh_frame` publishers (jitdump, GDB) re-emit them, so that debuggers show the
   caller's registers; SFrame has no place for them. `reserved` is 0. */
typedef struct jitunwind_saved_register {
  uint32_t pc_offset;
  uint16_t dwarf_reg;
  uint8_t rule; /* jitunwind_saved_rule */
  uint8_t reserved;
  int32_t cfa_offset; /* with JITUNWIND_SAVED_AT_CFA */
} jitunwind_saved_register;

/* Set in jitunwind_function.flags by the decoder: legal SFrame that jitunwind_frame_validate
   rejects (e.g. "FP saved" kept after an epilogue by gas and LLVM). Ignored on input. */
#define JITUNWIND_FUNCTION_NONCONFORMING 0x1u
/* The function is a signal trampoline (SFrame v3 signal frame; DWARF 'S' augmentation): its
   caller's PC is an interrupted PC, looked up as it is. Input and output. */
#define JITUNWIND_FUNCTION_SIGNAL_FRAME 0x2u
/* Set by the decoder: some row uses a register rule (JITUNWIND_CFA_REG, a dereferenced CFA,
   JITUNWIND_RA_REGISTER_*, JITUNWIND_FP_REGISTER_*). Ignored on input. */
#define JITUNWIND_FUNCTION_REGISTER_RULES 0x4u

/* A function: address range and rows (C mirror of jitunwind::function_desc). `rows` and
   `saved_registers` are not owned by the struct: see the function that filled it. Functions
   are array elements (the decoder's output): the struct never grows; `reserved` is 0 on input
   and output. */
typedef struct jitunwind_function {
  uint64_t start;
  uint32_t size;
  uint32_t pcmask_rep; /* 0, or the size of the repeated block (SFrame PCMASK) */
  const jitunwind_frame_row* rows;
  size_t row_count;
  /* Callee-saved registers other than SP, FP and RA, sorted by pc_offset (NULL and 0: none;
     jitunwind_frame_save_register fills them). */
  const jitunwind_saved_register* saved_registers;
  size_t saved_register_count;
  uint32_t flags;    /* JITUNWIND_FUNCTION_* */
  uint8_t pauth_key; /* AArch64 pointer-authentication key of the return addresses: 0 A, 1 B */
  uint8_t reserved8[3];
  uint64_t reserved[2];
} jitunwind_function;

/* Checks a function against the ABI's rules (jitunwind::validate). */
JITUNWIND_API jitunwind_status jitunwind_frame_validate(jitunwind_abi abi,
                                                        const jitunwind_function* function,
                                                        jitunwind_error* error);

/* A CFI-style row builder (jitunwind::frame_builder), used by one thread at a time.
   Directives take the code offset of the first instruction the new rule applies to. The first
   invalid directive makes the builder fail: later ones are ignored and return that status;
   jitunwind_frame_builder_finish reports the message. The builder makes the rows its
   directives describe (SP/FP-based CFA, RA and FP saved relative to the CFA) and the
   callee-saved registers of jitunwind_frame_save_register; rows with register rules (a DRAP
   prologue, RA kept in a register) are written as jitunwind_frame_row values directly. */
typedef struct jitunwind_frame_builder jitunwind_frame_builder;

JITUNWIND_API jitunwind_status jitunwind_frame_builder_create(jitunwind_abi abi,
                                                              jitunwind_frame_builder** out,
                                                              jitunwind_error* error);
JITUNWIND_API void jitunwind_frame_builder_destroy(jitunwind_frame_builder* builder);
/* Back to the ABI's entry rules, errors cleared. */
JITUNWIND_API void jitunwind_frame_builder_reset(jitunwind_frame_builder* builder);

JITUNWIND_API jitunwind_status jitunwind_frame_def_cfa(jitunwind_frame_builder* b, uint32_t at,
                                                       jitunwind_reg base, int32_t offset);
JITUNWIND_API jitunwind_status jitunwind_frame_def_cfa_offset(jitunwind_frame_builder* b,
                                                              uint32_t at, int32_t offset);
JITUNWIND_API jitunwind_status jitunwind_frame_adjust_cfa_offset(jitunwind_frame_builder* b,
                                                                 uint32_t at, int32_t delta);
JITUNWIND_API jitunwind_status jitunwind_frame_def_cfa_register(jitunwind_frame_builder* b,
                                                                uint32_t at, jitunwind_reg base);
JITUNWIND_API jitunwind_status jitunwind_frame_offset(jitunwind_frame_builder* b, uint32_t at,
                                                      jitunwind_reg reg, int32_t cfa_relative);
JITUNWIND_API jitunwind_status jitunwind_frame_restore(jitunwind_frame_builder* b, uint32_t at,
                                                       jitunwind_reg reg);
JITUNWIND_API jitunwind_status jitunwind_frame_undefined(jitunwind_frame_builder* b, uint32_t at,
                                                         jitunwind_reg reg);
JITUNWIND_API jitunwind_status jitunwind_frame_negate_ra_state(jitunwind_frame_builder* b,
                                                               uint32_t at);
/* Callee-saved register `dwarf_reg` (not SP, FP or RA: jitunwind_frame_offset is for those)
   is saved at CFA + cfa_relative (`.cfi_offset rbx, -24`); it reaches debuggers through the
   `.eh_frame` publishers (jitdump, GDB). */
JITUNWIND_API jitunwind_status jitunwind_frame_save_register(jitunwind_frame_builder* b,
                                                             uint32_t at, uint16_t dwarf_reg,
                                                             int32_t cfa_relative);
/* Callee-saved register `dwarf_reg` holds the caller's value again (`.cfi_restore rbx`). */
JITUNWIND_API jitunwind_status jitunwind_frame_restore_register(jitunwind_frame_builder* b,
                                                                uint32_t at, uint16_t dwarf_reg);
/* Pushes the current rules (`.cfi_remember_state`), e.g. before a mid-function epilogue. */
JITUNWIND_API jitunwind_status jitunwind_frame_remember_state(jitunwind_frame_builder* b);
/* Pops the rules pushed by remember_state and makes them current at `at`. */
JITUNWIND_API jitunwind_status jitunwind_frame_restore_state(jitunwind_frame_builder* b,
                                                             uint32_t at);
/* Shapes of common sequences (see jitunwind::frame_builder). */
JITUNWIND_API jitunwind_status jitunwind_frame_push_frame_pointer(jitunwind_frame_builder* b,
                                                                  uint32_t after_push,
                                                                  uint32_t after_set_fp);
JITUNWIND_API jitunwind_status jitunwind_frame_pop_frame_pointer(jitunwind_frame_builder* b,
                                                                 uint32_t after_pop);
JITUNWIND_API jitunwind_status jitunwind_frame_stack_alloc(jitunwind_frame_builder* b, uint32_t at,
                                                           int32_t bytes);
JITUNWIND_API jitunwind_status jitunwind_frame_stack_free(jitunwind_frame_builder* b, uint32_t at,
                                                          int32_t bytes);

/* Validates and returns the function [start, start + size). `out->rows` and
   `out->saved_registers` point into the builder and stay valid until the next finish, recipe,
   reset or destroy of this builder. The builder itself is left unchanged (more directives may
   follow). */
JITUNWIND_API jitunwind_status jitunwind_frame_builder_finish(jitunwind_frame_builder* builder,
                                                              uint64_t start, uint32_t size,
                                                              jitunwind_function* out,
                                                              jitunwind_error* error);

/* Recipes (jitunwind::recipes): the rows of common function shapes for the
   ABI of `storage`, a builder that only holds them: its directives are neither used nor
   changed; `out->rows` stays valid until the builder's next finish, recipe, reset or destroy.
   Offsets are code offsets, as for the directives. Errors: INVALID_ARGUMENT naming the bad
   offset (as the C++ recipes). */
typedef struct jitunwind_epilogue {
  uint32_t after_pop; /* after `leave`/`pop rbp` (FP frame) or `add rsp, N` (SP frame) */
  uint32_t after_ret; /* after `ret`; if < size, the body's rules resume there */
} jitunwind_epilogue;
/* A function that never moves SP and calls nothing: the entry rules hold throughout. */
JITUNWIND_API jitunwind_status jitunwind_frame_recipe_leaf(jitunwind_frame_builder* storage,
                                                           uint64_t start, uint32_t size,
                                                           jitunwind_function* out,
                                                           jitunwind_error* error);
/* push rbp; mov rbp, rsp; [body]; (leave|pop rbp; ret)+ (AArch64: stp/mov/ldp/ret). */
JITUNWIND_API jitunwind_status jitunwind_frame_recipe_frame_pointer(
    jitunwind_frame_builder* storage, uint64_t start, uint32_t size, uint32_t after_push,
    uint32_t after_set_fp, const jitunwind_epilogue* epilogues, size_t epilogue_count,
    jitunwind_function* out, jitunwind_error* error);
/* sub rsp, frame_bytes; [body]; (add rsp, frame_bytes; ret)+ with no frame pointer. */
JITUNWIND_API jitunwind_status jitunwind_frame_recipe_sp_frame(
    jitunwind_frame_builder* storage, uint64_t start, uint32_t size, uint32_t after_alloc,
    int32_t frame_bytes, const jitunwind_epilogue* epilogues, size_t epilogue_count,
    jitunwind_function* out, jitunwind_error* error);
/* An interpreter trampoline: sub rsp; call; add rsp; ret (jitunwind::recipes::trampoline). */
JITUNWIND_API jitunwind_status jitunwind_frame_recipe_trampoline(
    jitunwind_frame_builder* storage, uint64_t start, uint32_t size, uint32_t after_alloc,
    int32_t frame_bytes, uint32_t after_free, jitunwind_function* out, jitunwind_error* error);

/* ==== the on-ramp (jitunwind/onramp.h) ==================================================== */

/* A session: the publishers and windows (section "session, windows and publishers"). */
typedef struct jitunwind_session jitunwind_session;

/* Names `size` bytes of executable code the runtime placed at `code` for every profiler and
   debugger, in one call: the first call creates an implicit default session configured from
   the environment (JITUNWIND_PUBLISH, JITUNWIND_DIR, JITDUMPDIR, ...: as
   jitunwind_session_create_from_env). `rows` (`row_count` of them, pc_offset relative to
   `code`; from jitunwind_frame_builder_finish or written by hand) say how to find the caller at
   each instruction, so that profilers unwind through the code. Thread-safe. Errors:
   INVALID_ARGUMENT (rows: at least one; name; empty range), ALREADY_EXISTS (named already,
   or overlapping code named before), OUT_OF_RANGE (no room for the unwind table within 2 GiB
   of the code), the environment's. */
JITUNWIND_API jitunwind_status jitunwind_name_code(const void* code, size_t size, const char* name,
                                                   const jitunwind_frame_row* rows,
                                                   size_t row_count, jitunwind_error* error);
/* jitunwind_name_code for a whole function description (jitunwind::name_function): its range
   (function->start, ->size), rows, and what rows alone cannot say: the callee-saved registers
   (function->saved_registers, from jitunwind_frame_save_register: the jitdump and GDB
   publishers give them to debuggers) and JITUNWIND_FUNCTION_SIGNAL_FRAME. Forgotten with
   jitunwind_forget_code(function->start). Errors as jitunwind_name_code. */
JITUNWIND_API jitunwind_status jitunwind_name_function(const char* name,
                                                       const jitunwind_function* function,
                                                       jitunwind_error* error);
/* The code named at `code` will not run again: it is unpublished and forgotten. NOT_FOUND if
   it was not named. Thread-safe. */
JITUNWIND_API jitunwind_status jitunwind_forget_code(const void* code, jitunwind_error* error);
/* The implicit default session (created by the first call of this or jitunwind_name_code), for
   the rest of the API: status, windows of one's own. Owned by the library: never destroy it. */
JITUNWIND_API jitunwind_status jitunwind_default_session(jitunwind_session** out,
                                                         jitunwind_error* error);

/* ==== session, windows and publishers (jitunwind/window.h) ================================ */

/* A session owns the publishers and the code windows (see jitunwind/window.h and docs/window.md).
 * Session functions are thread-safe. A window belongs to its session (valid until
 * jitunwind_session_release or the session's end) and is used by one thread at a time;
 * different windows may be used from different threads. */
typedef struct jitunwind_window jitunwind_window;

/* Publisher bits (jitunwind::publisher). */
enum {
  JITUNWIND_PUBLISH_REGISTRY = 1u << 0,
  JITUNWIND_PUBLISH_USDT_EVENTS = 1u << 1,
  JITUNWIND_PUBLISH_PERFMAP = 1u << 2,
  JITUNWIND_PUBLISH_JITDUMP = 1u << 3,
  JITUNWIND_PUBLISH_GDB = 1u << 4,
  JITUNWIND_PUBLISH_KERNEL = 1u << 5,
  JITUNWIND_PUBLISH_DEFAULT = 0x17u /* REGISTRY, USDT_EVENTS, PERFMAP, GDB: JITDUMP is opt-in */
};

typedef enum jitunwind_publisher_state {
  JITUNWIND_PUBLISHER_DISABLED = 0,
  JITUNWIND_PUBLISHER_ACTIVE = 1,
  JITUNWIND_PUBLISHER_FAILED = 2,
  JITUNWIND_PUBLISHER_UNSUPPORTED = 3
} jitunwind_publisher_state;

/* session_options::reuse (jitunwind::address_reuse). */
typedef enum jitunwind_address_reuse {
  JITUNWIND_ADDRESS_REUSE_AUTO = 0, /* off while the perf map or jitdump publisher is active */
  JITUNWIND_ADDRESS_REUSE_ALLOWED = 1,
  JITUNWIND_ADDRESS_REUSE_NEVER = 2
} jitunwind_address_reuse;

/* owned_window_options::layout (jitunwind::code_layout). */
typedef enum jitunwind_code_layout {
  JITUNWIND_LAYOUT_PAGE_FLIP = 0,   /* RW until publish makes it RX; a page per publish */
  JITUNWIND_LAYOUT_MEMFD_ALIAS = 1, /* RX + RW views of a memfd; perf maps cannot name it */
  JITUNWIND_LAYOUT_SHARED_ALIAS = 2 /* RX + RW views of shared anonymous memory; sub-page */
} jitunwind_code_layout;

typedef enum jitunwind_window_state {
  JITUNWIND_WINDOW_OPEN = 0,
  JITUNWIND_WINDOW_SEALED = 1,
  JITUNWIND_WINDOW_RETIRED = 2,
  JITUNWIND_WINDOW_FREED = 3
} jitunwind_window_state;

/* Log sink: called synchronously from the thread doing the work; level 0 debug .. 3 error.
   `message` is not NUL-terminated. */
typedef void (*jitunwind_log_fn)(void* user, int level, const char* message, size_t length);

/* Durability of the file publishers (jitunwind::durability, same values;
   docs/publishers.md#durability). */
typedef enum jitunwind_durability {
  JITUNWIND_DURABILITY_SYNC = 0,   /* every record in the file when publish returns */
  JITUNWIND_DURABILITY_BATCHED = 1 /* the default: buffered; written by size, latency bound,
                                      seal/retire/free, jitunwind_session_flush, destroy, exit */
} jitunwind_durability;

/* Options of jitunwind_session_create (jitunwind::session_options); fill with
   jitunwind_session_options_init. Strings are copied; NULL means the default. */
typedef struct jitunwind_session_options {
  uint32_t struct_size;      /* sizeof(jitunwind_session_options), set by _init */
  jitunwind_abi abi;         /* 0 = AMD64 */
  uint32_t publishers;       /* JITUNWIND_PUBLISH_* bits */
  int log_min_level;         /* 0 debug .. 3 error */
  const char* perfmap_dir;   /* NULL or "" = /tmp */
  const char* jitdump_dir;   /* NULL or "" = $JITDUMPDIR or /tmp */
  const char* kernel_sframe; /* e.g. "prctl:79,80"; NULL = off (never guessed) */
  jitunwind_log_fn log;      /* NULL = no logging */
  void* log_user;
  /* Durability of the perf map and of the jitdump (JITUNWIND_DURABILITY_BATCHED). */
  jitunwind_durability perfmap_durability;
  jitunwind_durability jitdump_durability;
  /* batched: write at this many buffered bytes (65536; 0 also means the default); the longest
     a record waits (10 ms; 0: the default); 0: no background flusher thread (see
     jitunwind/window.h, session_options::flush_thread). */
  size_t flush_bytes;
  uint32_t flush_latency_ms;
  int flush_thread;                      /* 1 */
  jitunwind_address_reuse address_reuse; /* JITUNWIND_ADDRESS_REUSE_AUTO */
  /* SFrame version of every window's section: 3 (the default) or 2 (for readers of binutils
     2.41-2.45 / LLVM's era). */
  uint32_t sframe_version;
  /* 0: functions whose rows need an SFrame v3 flexible FDE (register rules) are refused when
     added, naming the function and row (for kernels whose v3 reader drops a whole section
     with one); 1 (the default): allowed. */
  int sframe_allow_flex;
  uint32_t reserved; /* 0 (keeps the struct free of padding) */
} jitunwind_session_options;

/* The defaults of jitunwind::session_options: AMD64, JITUNWIND_PUBLISH_DEFAULT, /tmp for the
   perf map, $JITDUMPDIR or /tmp for the jitdump, no kernel registration, batched durability
   with its limits and flusher thread, automatic address reuse, SFrame v3 with flexible FDEs,
   no log sink, log level 1 (info). */
JITUNWIND_API void jitunwind_session_options_init(jitunwind_session_options* options);

/* jitunwind_session_create: `options` NULL = the defaults (not the environment).
   jitunwind_session_create_from_env: the defaults overridden by the environment
   (JITUNWIND_PUBLISH, JITUNWIND_DIR, JITDUMPDIR, JITUNWIND_KERNEL_SFRAME,
   JITUNWIND_SFRAME_VERSION, JITUNWIND_SFRAME_FLEX, JITUNWIND_DURABILITY, JITUNWIND_FLUSH_MS,
   JITUNWIND_FLUSH_BYTES, JITUNWIND_FLUSH_THREAD, JITUNWIND_ADDRESS_REUSE), as
   jitunwind::session_options::from_env, with a log sink of level 1. */
JITUNWIND_API jitunwind_status jitunwind_session_create(const jitunwind_session_options* options,
                                                        jitunwind_session** out,
                                                        jitunwind_error* error);
JITUNWIND_API jitunwind_status jitunwind_session_create_from_env(jitunwind_log_fn log,
                                                                 void* log_user,
                                                                 jitunwind_session** out,
                                                                 jitunwind_error* error);
/* Retires and frees every window (their code must no longer run), stops the publishers. */
JITUNWIND_API void jitunwind_session_destroy(jitunwind_session* session);

/* State of one publisher (a single JITUNWIND_PUBLISH_* bit); `message` (may be NULL) receives
   its last note or error, truncated to `message_size`. */
JITUNWIND_API jitunwind_publisher_state jitunwind_session_publisher_state(
    const jitunwind_session* session, uint32_t publisher, char* message, size_t message_size);

/* Runs due grace-period callbacks; returns how many windows were freed or kept for reuse.
   Batched file publishers: also writes records that have waited the latency bound. */
JITUNWIND_API size_t jitunwind_session_poll(jitunwind_session* session);

/* Ends a window handle (session::release): a freed window goes now, a retired one when its
   grace period is over (a window kept for reuse is freed now). BAD_STATE for an open or sealed
   window, INVALID_ARGUMENT for a handle that is not (or no longer) the session's. */
JITUNWIND_API jitunwind_status jitunwind_session_release(jitunwind_session* session,
                                                         jitunwind_window* window,
                                                         jitunwind_error* error);
/* Non-zero if the session puts new code where published code was (address_reuse resolved). */
JITUNWIND_API int jitunwind_session_recycles_addresses(const jitunwind_session* session);

/* Writes every buffered perf map line and jitdump record now (batched durability). A file that
   cannot be written marks its publisher failed; its error is returned. */
JITUNWIND_API jitunwind_status jitunwind_session_flush(jitunwind_session* session,
                                                       jitunwind_error* error);

/* Options of jitunwind_session_create_owned_window (jitunwind::owned_window_options); fill with
   jitunwind_owned_window_options_init. */
typedef struct jitunwind_owned_window_options {
  uint32_t struct_size;         /* sizeof(jitunwind_owned_window_options), set by _init */
  jitunwind_code_layout layout; /* JITUNWIND_LAYOUT_PAGE_FLIP */
  size_t code_capacity;         /* bytes of code (1 MiB), rounded up to pages */
  size_t sframe_capacity;       /* bytes per SFrame buffer; 0 = derived from code_capacity */
} jitunwind_owned_window_options;
JITUNWIND_API void jitunwind_owned_window_options_init(jitunwind_owned_window_options* options);

/* Options of jitunwind_session_describe_window (jitunwind::described_window_options): the range
   of the runtime's memory the window describes. Fill with
   jitunwind_described_window_options_init, then set the range. */
typedef struct jitunwind_described_window_options {
  uint32_t struct_size; /* sizeof(jitunwind_described_window_options), set by _init */
  uint32_t reserved;    /* 0 */
  uint64_t text_start;
  size_t text_size;
  size_t sframe_capacity; /* bytes per SFrame buffer; 0 = derived from text_size */
} jitunwind_described_window_options;
JITUNWIND_API void jitunwind_described_window_options_init(
    jitunwind_described_window_options* options);

/* A window whose memory the SDK maps (`options` NULL: the defaults). */
JITUNWIND_API jitunwind_status jitunwind_session_create_owned_window(
    jitunwind_session* session, const jitunwind_owned_window_options* options,
    jitunwind_window** out, jitunwind_error* error);
/* A window over the runtime's own memory (`options` is required: it holds the range). Errors:
   INVALID_ARGUMENT (empty or wrapping range), ALREADY_EXISTS (overlaps a window not freed, or,
   with address reuse off, code published before), OUT_OF_RANGE (no room for the SFrame within
   2 GiB), NO_MEMORY. */
JITUNWIND_API jitunwind_status jitunwind_session_describe_window(
    jitunwind_session* session, const jitunwind_described_window_options* options,
    jitunwind_window** out, jitunwind_error* error);

JITUNWIND_API uint64_t jitunwind_window_id(const jitunwind_window* window);
/* How many times jitunwind_window_reuse gave the window's range back (not a generation). */
JITUNWIND_API uint32_t jitunwind_window_reuse_count(const jitunwind_window* window);
/* The process-wide generation of the window's last publish (registry, events, tools); 0 before. */
JITUNWIND_API uint64_t jitunwind_window_published_generation(const jitunwind_window* window);
JITUNWIND_API jitunwind_window_state jitunwind_window_get_state(const jitunwind_window* window);

/* Owned windows: reserves `size` bytes of code; `*address` is where it will run, `*writable`
   where to write it (valid until the next publish). */
JITUNWIND_API jitunwind_status jitunwind_window_allocate(jitunwind_window* window, size_t size,
                                                         size_t alignment, uint64_t* address,
                                                         void** writable, jitunwind_error* error);
/* Appends a function (rows from jitunwind_frame_builder_finish); `moved_from` != 0: copied
   from there (jitdump CODE_MOVE). Nothing is visible until publish; nothing changes on error. */
JITUNWIND_API jitunwind_status jitunwind_window_append(jitunwind_window* window, const char* name,
                                                       const jitunwind_function* function,
                                                       uint64_t moved_from, jitunwind_error* error);
JITUNWIND_API jitunwind_status jitunwind_window_publish(jitunwind_window* window,
                                                        jitunwind_error* error);
JITUNWIND_API jitunwind_status jitunwind_window_seal(jitunwind_window* window,
                                                     jitunwind_error* error);
/* Unpublishes. After `grace_ms`, the next jitunwind_session_poll calls `on_grace_over` (may be
   NULL); a non-zero return keeps the window for jitunwind_window_reuse, else it is freed (it is
   freed anyway when the session does not reuse addresses or the handle was released). */
JITUNWIND_API jitunwind_status jitunwind_window_retire(
    jitunwind_window* window, uint32_t grace_ms,
    int (*on_grace_over)(void* user, jitunwind_window* window), void* user, jitunwind_error* error);
JITUNWIND_API jitunwind_status jitunwind_window_reuse(jitunwind_window* window,
                                                      jitunwind_error* error);
/* Overwrites `size` bytes of code at `address` inside one appended function of an owned window
   (window::patch: W^X kept; up to 8 bytes in one aligned 8-byte word are stored atomically with
   the alias layouts; see docs/window.md for what may run meanwhile). */
JITUNWIND_API jitunwind_status jitunwind_window_patch(jitunwind_window* window, uint64_t address,
                                                      const void* bytes, size_t size,
                                                      jitunwind_error* error);
/* Takes the function starting at `start` out of the window at the next publish
   (window::retire_function: rows and GDB symbol go, code_remove fires). */
JITUNWIND_API jitunwind_status jitunwind_window_retire_function(jitunwind_window* window,
                                                                uint64_t start,
                                                                jitunwind_error* error);

/* The window's text range [start, start + size) and whether the SDK owns
   its memory (1: create_owned_window) or the runtime does (0: describe_window). */
JITUNWIND_API uint64_t jitunwind_window_text_start(const jitunwind_window* window);
JITUNWIND_API size_t jitunwind_window_text_size(const jitunwind_window* window);
JITUNWIND_API int jitunwind_window_is_owned(const jitunwind_window* window);
/* Gives a sub-range of an appended function a name of its own
   (window::name_range: interpreter handlers, stubs inside one block of code); the rows are
   checked as by append, the window's SFrame does not change. Visible at the next publish. */
JITUNWIND_API jitunwind_status jitunwind_window_name_range(jitunwind_window* window,
                                                           const char* name,
                                                           const jitunwind_function* function,
                                                           jitunwind_error* error);
/* Calls `visit` for each function appended (published or not), in address
   order, until it returns non-zero; `name` is valid during the call only. Returns how many
   were visited. */
typedef int (*jitunwind_function_visitor)(void* user, const char* name, uint64_t start,
                                          uint32_t size);
JITUNWIND_API size_t jitunwind_window_functions(const jitunwind_window* window,
                                                jitunwind_function_visitor visit, void* user);
/* The SFrame section as last published (NULL and 0 before the first
   publish); valid until the window's next publish, reuse or release. */
JITUNWIND_API const uint8_t* jitunwind_window_published_sframe(const jitunwind_window* window,
                                                               size_t* size);

/* ==== what perf sees: diagnostics and placement (docs/integrating.md, "What perf sees") ===== */

/* Where the default session's messages go (the on-ramp's session: publisher
   warnings such as "perf will lose this function's unwinding data", failures), besides the
   destination JITUNWIND_LOG names: `log` (NULL removes it) is called with `log_user`, a level
   (0 debug, 1 info, 2 warning, 3 error) of at least `min_level`, and the message (in C terms:
   it names jitunwind_* functions). May be called before or after the first
   jitunwind_name_code, from any thread; `log` may be called from any thread that names or
   forgets code. */
JITUNWIND_API jitunwind_status jitunwind_default_session_log(jitunwind_log_fn log, void* log_user,
                                                             int min_level,
                                                             jitunwind_error* error);
/* Bytes to leave free after `function` (its size, rows and saved registers: they make its
   unwinding data) before the next function starts, so that `perf inject --jit` keeps the code's
   unwinding data (perf maps each jitdump load over its code rounded up to 8 bytes plus the
   .eh_frame after it; code starting inside that range hides the earlier function's unwinding
   data from perf --call-graph dwarf). For runtimes that place their own code
   (jitunwind_name_code, described windows). INVALID_ARGUMENT for rows that do not validate or
   a NULL `gap`. */
JITUNWIND_API jitunwind_status jitunwind_perf_code_gap(jitunwind_abi abi,
                                                       const jitunwind_function* function,
                                                       size_t* gap, jitunwind_error* error);

#ifdef __cplusplus
}
#endif

#endif /* JITUNWIND_C_EMBED_H */
