/* jitunwind/registry_abi.h — the in-process window registry as other processes see it.
 *
 * Every process that contains the jitunwind SDK (libjitunwind.so, or an executable that links it
 * statically) has one object named `jitunwind_registry` (JITUNWIND_REGISTRY_SYMBOL) of type
 * `jitunwind_registry_header`. It lists the process's code windows so that an external tool
 * (the eBPF walker, a profiler, a debugger) can find their text ranges and SFrame sections with
 * `process_vm_readv`, without stopping the process. docs/registry-abi.md describes the layout
 * byte by byte and the read protocol step by step; this header is the same contract in C.
 *
 * This header only describes memory. Readers use `jitunwind/remote.h`; the writer is internal to
 * the SDK. Safe to include from C and C++. All fields are little-endian (x86-64, AArch64 LE) and
 * naturally aligned; there is no padding the compiler could choose differently.
 */
#ifndef JITUNWIND_REGISTRY_ABI_H
#define JITUNWIND_REGISTRY_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Name of the exported object (dynamic symbol in libjitunwind.so; in an executable that links the
   SDK statically it is in .dynsym when linked with -Wl,--export-dynamic-symbol=jitunwind_registry
   (the CMake target and pkg-config file add that), otherwise only in .symtab). Never changes. */
#define JITUNWIND_REGISTRY_SYMBOL "jitunwind_registry"

/* The 8 magic bytes at offset 0: "JITUNWRG". */
#define JITUNWIND_REGISTRY_MAGIC "JITUNWRG"

/* Major version of the layout. A reader must refuse any other value. Compatible additions never
   bump it: they use the reserved fields or grow header_size / entry_size (readers use the sizes
   in the header as strides and ignore bytes they do not know). */
#define JITUNWIND_REGISTRY_VERSION 1u

/* The offset columns below are the documentation: */
/* clang-format off */

/* Slot states. */
#define JITUNWIND_WINDOW_FREE 0u    /* unused slot: ignore every other field */
#define JITUNWIND_WINDOW_LIVE 1u    /* the window's code may run: use its SFrame */
#define JITUNWIND_WINDOW_RETIRED 2u /* grace period: code may still be on some stack, no new calls;
                                       memory stays valid until the slot changes again */

/* The exported object: 64 bytes. */
typedef struct jitunwind_registry_header {
  char magic[8];          /*  0: JITUNWIND_REGISTRY_MAGIC, no terminator */
  uint32_t version;       /*  8: JITUNWIND_REGISTRY_VERSION */
  uint32_t header_size;   /* 12: sizeof(jitunwind_registry_header) = 64 (or more, later) */
  uint32_t entry_size;    /* 16: stride of the entry array = 64 (or more, later) */
  uint32_t capacity;      /* 20: number of entries the array can hold */
  uint64_t entries;       /* 24: address of entry 0; 0 until the first window is published */
  uint64_t slot_count;    /* 32: entries [0, slot_count) may be in use (high-water mark) */
  uint64_t change_count;  /* 40: incremented after every completed change of any entry */
  uint64_t writer_pid;    /* 48: getpid() of the process that published the first window */
  uint64_t status;        /* 56: address of the publisher status area
                                 (jitunwind_registry_status_header); 0 while there is none, and
                                 in writers before it was added (the field was reserved, 0) */
} jitunwind_registry_header;

/* One slot: 128 bytes (two cache lines), 64-byte aligned; writers before the SFrame v3 release
   used 64-byte entries (the fields up to `abi`), so readers must accept entry_size 64 and read
   `sframe_version` only when entry_size covers it. Protected by `seq`, a sequence counter: odd
   while the writer changes the slot, incremented again (to even) when done. A copy of the slot
   is valid only if `seq` read before and after copying it is the same even number. */
typedef struct jitunwind_registry_entry {
  uint64_t seq;          /*  0: sequence counter (even = stable) */
  uint64_t window_id;    /*  8: the runtime's id for the window (may be reused after release) */
  uint64_t generation;   /* 16: unique in the process for each published (window, contents);
                                never reused, strictly increasing over time; 0 only when free */
  uint64_t text_start;   /* 24: first byte of the window's code */
  uint64_t text_size;    /* 32: bytes of code */
  uint64_t sframe_addr;  /* 40: SFrame section describing the code (0 if none yet) */
  uint64_t sframe_size;  /* 48: bytes of the SFrame section */
  uint32_t state;        /* 56: JITUNWIND_WINDOW_FREE / _LIVE / _RETIRED */
  uint32_t abi;          /* 60: SFrame ABI id of the code: 1 AArch64 BE, 2 AArch64 LE, 3 AMD64 */
  uint32_t sframe_version; /* 64: version byte of the SFrame section (2 or 3); 0 while there is
                                  no section, and in 64-byte entries (older writers) */
  uint32_t reserved0;    /* 68: 0 */
  uint64_t reserved[7];  /* 72: 0 */
} jitunwind_registry_entry;

/* The smallest entry_size a reader accepts: the fields up to `abi` (the layout of writers before
   `sframe_version` was added). */
#define JITUNWIND_REGISTRY_ENTRY_MIN_SIZE 64u

/* The publisher status area: what each session's publishers are doing, as session::status()
   says in the process ("writing /tmp/perf-12.map; 3 warnings, the last: ..."), for tools outside
   it (`jitunwind windows list`). A header, then `capacity` records of `record_size` bytes at
   `header_size` bytes after its start. Records follow the entries' seqlock protocol (`seq` odd
   while written). Texts are UTF-8 as the process wrote them, not terminated: their sizes say how
   many bytes are used, and a reader must check them against the fields' sizes. */
#define JITUNWIND_REGISTRY_STATUS_MAGIC "JITUNWST"

typedef struct jitunwind_registry_status_header {
  char magic[8];          /*  0: JITUNWIND_REGISTRY_STATUS_MAGIC, no terminator */
  uint32_t header_size;   /*  8: 32 (or more, later) */
  uint32_t record_size;   /* 12: stride of the records: 1024 (or more, later) */
  uint32_t capacity;      /* 16: records in the area */
  uint32_t record_count;  /* 20: records [0, record_count) may be in use (high-water mark) */
  uint64_t change_count;  /* 24: incremented after every completed change of a record */
} jitunwind_registry_status_header;

typedef struct jitunwind_registry_status_record {
  uint64_t seq;           /*   0: sequence counter (even = stable), as in entries */
  uint64_t session;       /*   8: the session's number in the process (from 1); 0: free */
  uint32_t publisher;     /*  16: the publisher: 1 registry, 2 usdt-events, 4 perfmap, 8 jitdump,
                                  16 gdb, 32 kernel (jitunwind::publisher) */
  uint32_t state;         /*  20: 0 disabled, 1 active, 2 failed, 3 unsupported */
  uint64_t warnings;      /*  24: warnings the publisher gave so far */
  uint16_t message_size;  /*  32: bytes used in message */
  uint16_t warning_size;  /*  34: bytes used in last_warning */
  uint32_t reserved0;     /*  36: 0 */
  char message[216];      /*  40: its note or last error ("writing /tmp/perf-12.map") */
  char last_warning[768]; /* 256: the last warning, cut at a UTF-8 character boundary */
} jitunwind_registry_status_record;

/* clang-format on */

#ifdef __cplusplus
}  // extern "C"
static_assert(sizeof(jitunwind_registry_header) == 64, "registry ABI: header is 64 bytes");
static_assert(sizeof(jitunwind_registry_entry) == 128, "registry ABI: entry is 128 bytes");
static_assert(sizeof(jitunwind_registry_status_header) == 32, "registry ABI: status header");
static_assert(sizeof(jitunwind_registry_status_record) == 1024, "registry ABI: status record");
#endif

#endif /* JITUNWIND_REGISTRY_ABI_H */
