/* jitunwind/c/tooling.h — the C API for tools: the SFrame encoder, decoder, lookup and
 * unwinder, and the remote registry reader (what a profiler reads from another process).
 *
 * Conventions: as jitunwind/c/embed.h.
 */
#ifndef JITUNWIND_C_TOOLING_H
#define JITUNWIND_C_TOOLING_H

#include <jitunwind/c/embed.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== sframe (jitunwind/sframe.h) ========================================================= */

#define JITUNWIND_SFRAME_F_FDE_SORTED 0x1u
#define JITUNWIND_SFRAME_F_FRAME_POINTER 0x2u
#define JITUNWIND_SFRAME_F_FDE_FUNC_START_PCREL 0x4u

/* The decoded header of an SFrame section. */
typedef struct jitunwind_sframe_info {
  uint8_t version;
  uint8_t flags; /* JITUNWIND_SFRAME_F_* */
  uint8_t abi;   /* jitunwind_abi */
  int8_t cfa_fixed_fp_offset;
  int8_t cfa_fixed_ra_offset;
  uint8_t aux_header_len;
  uint32_t num_fdes; /* functions */
  uint32_t num_fres; /* rows, all functions together */
  uint32_t fre_len;
  uint32_t fde_off;
  uint32_t fre_off;
} jitunwind_sframe_info;

/* Encoder options; start from jitunwind_sframe_encoder_options_init (the C++ defaults). */
typedef struct jitunwind_sframe_encoder_options {
  uint32_t struct_size; /* sizeof(jitunwind_sframe_encoder_options), set by _init */
  jitunwind_abi abi;
  uint64_t section_address; /* where the section's first byte will be */
  int pcrel;                /* 1 (default): FDE_FUNC_START_PCREL; 0: section-relative starts */
  int frame_pointer;        /* -1 (default): automatic; 0 or 1: force the FRAME_POINTER flag */
  int strict;               /* 1 (default): jitunwind_frame_validate rules; 0: format rules */
  int version;              /* 3 (default): SFrame v3 (binutils 2.46, kernel series); or 2 */
  int allow_flex;           /* 1 (default); 0: refuse functions that need a v3 FLEX FDE */
  int reserved;             /* 0 (keeps the struct free of padding) */
} jitunwind_sframe_encoder_options;

JITUNWIND_API void jitunwind_sframe_encoder_options_init(jitunwind_sframe_encoder_options* o);

/* SFrame v3/v2 encoder (jitunwind::sframe::encoder): functions are appended in address order and
   the section can be written at any time. One thread at a time. */
typedef struct jitunwind_sframe_encoder jitunwind_sframe_encoder;

JITUNWIND_API jitunwind_status
jitunwind_sframe_encoder_create(const jitunwind_sframe_encoder_options* options,
                                jitunwind_sframe_encoder** out, jitunwind_error* error);
JITUNWIND_API void jitunwind_sframe_encoder_destroy(jitunwind_sframe_encoder* encoder);
/* Nothing is appended on error (invalid rows, overlap/out of order, out of ±2 GiB reach). A row
   with a register rule needs a v3 encoder with allow_flex; otherwise INVALID_ARGUMENT names the
   function, the row and why ("SFrame v2 cannot express it"). */
JITUNWIND_API jitunwind_status jitunwind_sframe_encoder_append(jitunwind_sframe_encoder* encoder,
                                                               const jitunwind_function* function,
                                                               jitunwind_error* error);
/* Bytes jitunwind_sframe_encoder_write produces now. */
JITUNWIND_API size_t jitunwind_sframe_encoder_size(const jitunwind_sframe_encoder* encoder);
JITUNWIND_API size_t
jitunwind_sframe_encoder_function_count(const jitunwind_sframe_encoder* encoder);
/* Writes the section into the caller's buffer of `capacity` bytes (at least _size()). */
JITUNWIND_API jitunwind_status jitunwind_sframe_encoder_write(
    const jitunwind_sframe_encoder* encoder, void* out, size_t capacity, jitunwind_error* error);
/* The section will live at another address; the encoder is unchanged on error. */
JITUNWIND_API jitunwind_status jitunwind_sframe_encoder_relocate(jitunwind_sframe_encoder* encoder,
                                                                 uint64_t new_section_address,
                                                                 jitunwind_error* error);

/* Validates a v1/v2/v3 section at `section_address` (hostile input: E_MALFORMED / E_UNSUPPORTED
   with a message naming the structure, index and values). `info` may be NULL. */
JITUNWIND_API jitunwind_status jitunwind_sframe_check(const void* bytes, size_t size,
                                                      uint64_t section_address,
                                                      jitunwind_sframe_info* info,
                                                      jitunwind_error* error);

/* A decoded section allocated by the library, released with jitunwind_sframe_decoded_free.
   functions[i].rows point into `rows`; everything lives in one allocation. */
typedef struct jitunwind_sframe_decoded {
  jitunwind_sframe_info info;
  jitunwind_function* functions; /* info.num_fdes entries, in FDE order, absolute starts */
  jitunwind_frame_row* rows;     /* info.num_fres entries */
} jitunwind_sframe_decoded;

JITUNWIND_API jitunwind_status jitunwind_sframe_decode(const void* bytes, size_t size,
                                                       uint64_t section_address,
                                                       jitunwind_sframe_decoded** out,
                                                       jitunwind_error* error);
JITUNWIND_API void jitunwind_sframe_decoded_free(jitunwind_sframe_decoded* decoded);
/* Decodes into caller-owned arrays: `functions` must hold info.num_fdes entries and `rows`
   info.num_fres (learn both from jitunwind_sframe_check); E_LIMIT_EXCEEDED if they are
   smaller. functions[i].rows point into `rows`. `info` may be NULL. */
JITUNWIND_API jitunwind_status jitunwind_sframe_decode_into(
    const void* bytes, size_t size, uint64_t section_address, jitunwind_sframe_info* info,
    jitunwind_function* functions, size_t function_capacity, jitunwind_frame_row* rows,
    size_t row_capacity, jitunwind_error* error);

/* A validated lookup table over a section (jitunwind::sframe::table). It does not copy the
   bytes: they must outlive the table and must not change. Immutable: lookups may run on any
   number of threads. */
typedef struct jitunwind_sframe_table jitunwind_sframe_table;

typedef struct jitunwind_sframe_lookup {
  size_t function_index;
  uint64_t function_start;
  uint32_t function_size;
  jitunwind_frame_row row;
} jitunwind_sframe_lookup;

JITUNWIND_API jitunwind_status jitunwind_sframe_table_create(const void* bytes, size_t size,
                                                             uint64_t section_address,
                                                             jitunwind_sframe_table** out,
                                                             jitunwind_error* error);
JITUNWIND_API void jitunwind_sframe_table_destroy(jitunwind_sframe_table* table);
JITUNWIND_API void jitunwind_sframe_table_info(const jitunwind_sframe_table* table,
                                               jitunwind_sframe_info* out);
/* 1 and *out filled if a function covers pc, else 0. */
JITUNWIND_API int jitunwind_sframe_table_find(const jitunwind_sframe_table* table, uint64_t pc,
                                              jitunwind_sframe_lookup* out);

/* Unwinding. */
typedef struct jitunwind_regs {
  uint64_t pc;
  uint64_t sp;
  uint64_t fp;
  uint64_t lr; /* AArch64 link register; used only in the innermost frame */
} jitunwind_regs;

/* Reads `len` bytes of the target's memory at `address`; nonzero on success. */
typedef int (*jitunwind_read_memory_fn)(void* user, uint64_t address, void* out, size_t len);

typedef enum jitunwind_stop_reason {
  JITUNWIND_STOP_OUTERMOST = 0,   /* a frame whose RA is undefined: the proper end */
  JITUNWIND_STOP_NO_TABLE = 1,    /* no table covers the PC */
  JITUNWIND_STOP_UNREADABLE = 2,  /* the reader failed */
  JITUNWIND_STOP_NO_PROGRESS = 3, /* the caller's SP is not above the callee's */
  JITUNWIND_STOP_DEPTH_LIMIT = 4, /* max_pcs reached */
  JITUNWIND_STOP_BAD_RULE = 5,    /* the row cannot be applied here */
  JITUNWIND_STOP_ZERO_PC = 6,     /* the return address read was 0 */
  /* a register rule names a register jitunwind_regs does not have (other than SP, FP, LR) */
  JITUNWIND_STOP_UNSUPPORTED_RULE = 7
} jitunwind_stop_reason;

JITUNWIND_API const char* jitunwind_stop_reason_string(jitunwind_stop_reason reason);

/* One step (jitunwind::sframe::step): 1 and *caller filled, or 0 and *reason set. Register
   rules naming a register other than SP, FP or LR stop with JITUNWIND_STOP_UNSUPPORTED_RULE. */
JITUNWIND_API int jitunwind_sframe_step(jitunwind_abi abi, const jitunwind_frame_row* row,
                                        const jitunwind_regs* callee, int innermost,
                                        jitunwind_read_memory_fn read, void* user,
                                        jitunwind_regs* caller, jitunwind_stop_reason* reason);

/* A whole walk from `start` over `table_count` tables (all of `abi`): stores up to `max_pcs`
   PCs (pcs[0] = start->pc, then return addresses) and returns how many; *reason says why it
   stopped. Tables with another ABI are skipped. Thread-safe for constant tables. Returns 0
   (nothing stored) only for NULL arguments, an unknown ABI (reason BAD_RULE) or when memory
   runs out (reason DEPTH_LIMIT). */
JITUNWIND_API size_t jitunwind_sframe_unwind(jitunwind_abi abi,
                                             const jitunwind_sframe_table* const* tables,
                                             size_t table_count, const jitunwind_regs* start,
                                             jitunwind_read_memory_fn read, void* user,
                                             uint64_t* pcs, size_t max_pcs,
                                             jitunwind_stop_reason* reason);

/* ==== remote registry reader (jitunwind/remote.h) ========================================= */

/* A window found in another process's registry (see jitunwind/remote.h, docs/registry-abi.md). */
typedef enum jitunwind_remote_window_state {
  JITUNWIND_REMOTE_WINDOW_LIVE = 1,   /* its code may run: use its SFrame */
  JITUNWIND_REMOTE_WINDOW_RETIRED = 2 /* grace period: frames may still be on stacks */
} jitunwind_remote_window_state;

typedef struct jitunwind_remote_window {
  uint64_t window_id;
  uint64_t generation; /* unique per published contents of the window */
  uint32_t state;      /* jitunwind_remote_window_state */
  uint32_t abi;        /* SFrame ABI id: 1 AArch64 BE, 2 AArch64 LE, 3 AMD64 */
  uint64_t text_start;
  uint64_t text_size;
  uint64_t sframe_address; /* 0 if the window has no SFrame yet */
  uint64_t sframe_size;
  uint64_t registry_address; /* the `jitunwind_registry` object it was read from */
  uint64_t entry_address;    /* its entry, and the entry's sequence value when copied: */
  uint64_t sequence;         /*   jitunwind_remote_read_sframe re-checks them */
  uint32_t slot;
  uint32_t sframe_version; /* 2 or 3 as the writer says; 0 if not said (older writers) */
  uint64_t reserved[2];    /* 0: room for what later registry versions say (array element) */
} jitunwind_remote_window;

/* Reads the live and retired windows of every jitunwind registry in process `pid` (consistent
   copies, read with process_vm_readv without stopping it). On success `*windows` is a malloc'd
   array of `*count` entries (NULL if none) that the caller frees with jitunwind_remote_free.
   Thread-safe. Errors: NOT_FOUND (no such process, no file mappings, no registry in it),
   PERMISSION_DENIED, UNSUPPORTED (other registry version), MALFORMED, BAD_STATE (entries kept
   changing), OUT_OF_RANGE (unmapped address, short read), LIMIT_EXCEEDED, NO_MEMORY,
   IO_ERROR. */
JITUNWIND_API jitunwind_status jitunwind_remote_read_registry(int pid,
                                                              jitunwind_remote_window** windows,
                                                              size_t* count,
                                                              jitunwind_error* error);

/* Copies a window's SFrame section out of process `pid` into a malloc'd buffer (`*bytes`,
   `*size`; free with jitunwind_remote_free), then fails with BAD_STATE if the window changed
   meanwhile (read the registry again), also when the copy failed because the window was freed
   and unmapped meanwhile. Thread-safe. */
JITUNWIND_API jitunwind_status jitunwind_remote_read_sframe(int pid,
                                                            const jitunwind_remote_window* window,
                                                            uint8_t** bytes, size_t* size,
                                                            jitunwind_error* error);

/* Frees memory returned by the jitunwind_remote_* functions. NULL is allowed. */
JITUNWIND_API void jitunwind_remote_free(void* memory);

#ifdef __cplusplus
}
#endif

#endif /* JITUNWIND_C_TOOLING_H */
