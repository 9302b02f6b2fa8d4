/* The frame and sframe C API, exercised from a C translation unit (compiled as C11). Each
   function returns 0 on success or the line of the first failed check, with a message in
   `why`. Called from capi_test.cpp. */
#include <jitunwind/jitunwind.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT(cond)                                                \
  do {                                                              \
    if (!(cond)) {                                                  \
      snprintf(why, why_len, "%s (error: %s)", #cond, err.message); \
      return __LINE__;                                              \
    }                                                               \
  } while (0)

/* A fake stack: words at [base, base + 8 * count). */
struct stack {
  uint64_t base;
  const uint64_t* words;
  size_t count;
};

static int read_stack(void* user, uint64_t address, void* out, size_t len) {
  const struct stack* s = (const struct stack*)user;
  if (address < s->base || len != 8 || (address - s->base) % 8 != 0 ||
      (address - s->base) / 8 >= s->count)
    return 0;
  memcpy(out, &s->words[(address - s->base) / 8], 8);
  return 1;
}

int capi_c_encode_decode(char* why, size_t why_len) {
  jitunwind_error err = {JITUNWIND_OK, ""};

  /* push rbp (1) ; mov rbp, rsp (4) ; ... pop rbp (11) ; ret (12) ; ... leave (21) ; ret */
  jitunwind_frame_builder* b = NULL;
  EXPECT(jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_push_frame_pointer(b, 1, 4) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_remember_state(b) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_pop_frame_pointer(b, 11) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_restore_state(b, 12) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_pop_frame_pointer(b, 21) == JITUNWIND_OK);
  jitunwind_function f;
  EXPECT(jitunwind_frame_builder_finish(b, 0x1000, 22, &f, &err) == JITUNWIND_OK);
  EXPECT(f.row_count == 6);
  EXPECT(f.rows[2].cfa_base == JITUNWIND_CFA_FP && f.rows[2].cfa_offset == 16);
  EXPECT(f.rows[2].fp_rule == JITUNWIND_FP_SAVED && f.rows[2].fp_offset == -16);
  EXPECT(jitunwind_frame_validate(JITUNWIND_ABI_AMD64, &f, &err) == JITUNWIND_OK);

  /* Encode at 0x2000 (PCREL, the default). */
  jitunwind_sframe_encoder_options opt;
  jitunwind_sframe_encoder_options_init(&opt);
  opt.section_address = 0x2000;
  jitunwind_sframe_encoder* enc = NULL;
  EXPECT(jitunwind_sframe_encoder_create(&opt, &enc, &err) == JITUNWIND_OK);
  EXPECT(jitunwind_sframe_encoder_append(enc, &f, &err) == JITUNWIND_OK);
  /* Overlapping the first function is refused, with a message. */
  jitunwind_function overlap = f;
  overlap.start = 0x1010;
  EXPECT(jitunwind_sframe_encoder_append(enc, &overlap, &err) == JITUNWIND_E_INVALID_ARGUMENT);
  EXPECT(strstr(err.message, "0x1010") != NULL);
  EXPECT(jitunwind_sframe_encoder_function_count(enc) == 1);
  const size_t size = jitunwind_sframe_encoder_size(enc);
  uint8_t* bytes = malloc(size);
  EXPECT(jitunwind_sframe_encoder_write(enc, bytes, size - 1, &err) ==
         JITUNWIND_E_INVALID_ARGUMENT);
  EXPECT(jitunwind_sframe_encoder_write(enc, bytes, size, &err) == JITUNWIND_OK);
  EXPECT(bytes[0] == 0xe2 && bytes[1] == 0xde && bytes[2] == 3);

  /* Check, then decode into arrays sized from the header. */
  jitunwind_sframe_info info;
  EXPECT(jitunwind_sframe_check(bytes, size, 0x2000, &info, &err) == JITUNWIND_OK);
  EXPECT(info.num_fdes == 1 && info.num_fres == 6 && info.abi == JITUNWIND_ABI_AMD64);
  /* v3 (the default) has no FRAME_POINTER flag. */
  EXPECT(info.flags == (JITUNWIND_SFRAME_F_FDE_SORTED | JITUNWIND_SFRAME_F_FDE_FUNC_START_PCREL));
  jitunwind_function* fns = calloc(info.num_fdes, sizeof *fns);
  jitunwind_frame_row* rows = calloc(info.num_fres, sizeof *rows);
  EXPECT(jitunwind_sframe_decode_into(bytes, size, 0x2000, NULL, fns, 1, rows, 5, &err) ==
         JITUNWIND_E_LIMIT_EXCEEDED);
  EXPECT(jitunwind_sframe_decode_into(bytes, size, 0x2000, NULL, fns, 1, rows, 6, &err) ==
         JITUNWIND_OK);
  EXPECT(fns[0].start == 0x1000 && fns[0].size == 22 && fns[0].row_count == 6);
  EXPECT(memcmp(fns[0].rows, f.rows, 6 * sizeof *rows) == 0);
  free(fns);
  free(rows);

  /* Library-allocated decode of the relocated section. */
  EXPECT(jitunwind_sframe_encoder_relocate(enc, 0x70000000, &err) == JITUNWIND_OK);
  /* v3 start offsets are 64-bit: any address is in reach (v2: +-2 GiB, checked below). */
  EXPECT(jitunwind_sframe_encoder_relocate(enc, 0x100000000ull, &err) == JITUNWIND_OK);
  EXPECT(jitunwind_sframe_encoder_relocate(enc, 0x70000000, &err) == JITUNWIND_OK);
  EXPECT(jitunwind_sframe_encoder_write(enc, bytes, size, &err) == JITUNWIND_OK);
  jitunwind_sframe_decoded* dec = NULL;
  EXPECT(jitunwind_sframe_decode(bytes, size, 0x70000000, &dec, &err) == JITUNWIND_OK);
  EXPECT(dec->info.num_fdes == 1 && dec->functions[0].start == 0x1000);
  EXPECT(dec->functions[0].flags == 0);
  EXPECT(memcmp(dec->functions[0].rows, f.rows, 6 * sizeof *rows) == 0);
  jitunwind_sframe_decoded_free(dec);

  /* A corrupt section: a clean error naming what is wrong. */
  bytes[16] = 0xff; /* FRE sub-section length */
  EXPECT(jitunwind_sframe_decode(bytes, size, 0x70000000, &dec, &err) == JITUNWIND_E_MALFORMED);
  EXPECT(dec == NULL);
  EXPECT(strncmp(err.message, "sframe: ", 8) == 0);

  free(bytes);
  jitunwind_sframe_encoder_destroy(enc);

  /* SFrame v2 on request: version byte 2, 32-bit start offsets (+-2 GiB reach). */
  opt.version = 2;
  EXPECT(jitunwind_sframe_encoder_create(&opt, &enc, &err) == JITUNWIND_OK);
  EXPECT(jitunwind_sframe_encoder_append(enc, &f, &err) == JITUNWIND_OK);
  EXPECT(jitunwind_sframe_encoder_relocate(enc, 0x100000000ull, &err) == JITUNWIND_E_OUT_OF_RANGE);
  const size_t size2 = jitunwind_sframe_encoder_size(enc);
  uint8_t* bytes2 = malloc(size2);
  EXPECT(jitunwind_sframe_encoder_write(enc, bytes2, size2, &err) == JITUNWIND_OK);
  EXPECT(bytes2[2] == 2);
  free(bytes2);
  jitunwind_sframe_encoder_destroy(enc);
  jitunwind_frame_builder_destroy(b);

  /* A bad directive sticks and is reported by finish. */
  EXPECT(jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_stack_alloc(b, 8, 16) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_stack_alloc(b, 4, 16) == JITUNWIND_E_INVALID_ARGUMENT);
  EXPECT(jitunwind_frame_def_cfa_offset(b, 9, 8) == JITUNWIND_E_INVALID_ARGUMENT);
  EXPECT(jitunwind_frame_builder_finish(b, 0, 16, &f, &err) == JITUNWIND_E_INVALID_ARGUMENT);
  EXPECT(strstr(err.message, "offset 4") != NULL);
  jitunwind_frame_builder_destroy(b);

  /* C lets any int into an enum: an unknown register fails the builder like any bad directive
     (finish used to succeed with the directive silently dropped). */
  EXPECT(jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_push_frame_pointer(b, 1, 4) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_def_cfa_register(b, 8, (jitunwind_reg)3) == JITUNWIND_E_INVALID_ARGUMENT);
  EXPECT(jitunwind_frame_restore(b, 9, JITUNWIND_REG_FP) == JITUNWIND_E_INVALID_ARGUMENT);
  EXPECT(jitunwind_frame_builder_finish(b, 0x1000, 16, &f, &err) == JITUNWIND_E_INVALID_ARGUMENT);
  EXPECT(strstr(err.message, "unknown register 255") != NULL);
  jitunwind_frame_builder_reset(b);
  EXPECT(jitunwind_frame_offset(b, 2, (jitunwind_reg)-1, -16) == JITUNWIND_E_INVALID_ARGUMENT);
  jitunwind_frame_builder_destroy(b);
  return 0;
}

int capi_c_lookup_and_unwind(char* why, size_t why_len) {
  jitunwind_error err = {JITUNWIND_OK, ""};
  /* outer: outermost frame at 0x1000; inner: sub rsp, 24 at 0x1100 (CFA = SP + 32 from 4). */
  jitunwind_frame_builder* b = NULL;
  jitunwind_function outer, inner;
  EXPECT(jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_undefined(b, 0, JITUNWIND_REG_RA) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_builder_finish(b, 0x1000, 0x40, &outer, &err) == JITUNWIND_OK);
  jitunwind_frame_row outer_row = outer.rows[0];
  outer.rows = &outer_row;
  jitunwind_frame_builder_reset(b);
  EXPECT(jitunwind_frame_stack_alloc(b, 4, 24) == JITUNWIND_OK);
  EXPECT(jitunwind_frame_builder_finish(b, 0x1100, 0x40, &inner, &err) == JITUNWIND_OK);

  jitunwind_sframe_encoder_options opt;
  jitunwind_sframe_encoder_options_init(&opt);
  opt.section_address = 0x3000;
  jitunwind_sframe_encoder* enc = NULL;
  EXPECT(jitunwind_sframe_encoder_create(&opt, &enc, &err) == JITUNWIND_OK);
  EXPECT(jitunwind_sframe_encoder_append(enc, &outer, &err) == JITUNWIND_OK);
  EXPECT(jitunwind_sframe_encoder_append(enc, &inner, &err) == JITUNWIND_OK);
  const size_t size = jitunwind_sframe_encoder_size(enc);
  uint8_t* bytes = malloc(size);
  EXPECT(jitunwind_sframe_encoder_write(enc, bytes, size, &err) == JITUNWIND_OK);
  jitunwind_sframe_encoder_destroy(enc);
  jitunwind_frame_builder_destroy(b);

  jitunwind_sframe_table* table = NULL;
  EXPECT(jitunwind_sframe_table_create(bytes, size, 0x3000, &table, &err) == JITUNWIND_OK);
  jitunwind_sframe_lookup hit;
  EXPECT(jitunwind_sframe_table_find(table, 0x1108, &hit) == 1);
  EXPECT(hit.function_index == 1 && hit.function_start == 0x1100 && hit.row.cfa_offset == 32);
  EXPECT(jitunwind_sframe_table_find(table, 0x1080, &hit) == 0);

  /* Stack: inner was interrupted at 0x1108 with SP = 0x8000; its RA (into outer) is at
     CFA - 8 = 0x8018. */
  uint64_t words[4] = {0, 0, 0, 0x1010};
  struct stack s = {0x8000, words, 4};
  jitunwind_regs start = {0x1108, 0x8000, 0, 0};
  jitunwind_regs caller;
  jitunwind_stop_reason reason;
  EXPECT(jitunwind_sframe_step(JITUNWIND_ABI_AMD64, &hit.row, &start, 1, read_stack, &s, &caller,
                               &reason) == 1);
  EXPECT(caller.pc == 0x1010 && caller.sp == 0x8020);

  const jitunwind_sframe_table* tables[1] = {table};
  uint64_t pcs[8];
  size_t n = jitunwind_sframe_unwind(JITUNWIND_ABI_AMD64, tables, 1, &start, read_stack, &s, pcs, 8,
                                     &reason);
  EXPECT(n == 2 && pcs[0] == 0x1108 && pcs[1] == 0x1010);
  EXPECT(reason == JITUNWIND_STOP_OUTERMOST);
  EXPECT(strcmp(jitunwind_stop_reason_string(reason), "outermost") == 0);
  /* An unreadable stack stops the walk cleanly. */
  s.count = 2;
  n = jitunwind_sframe_unwind(JITUNWIND_ABI_AMD64, tables, 1, &start, read_stack, &s, pcs, 8,
                              &reason);
  EXPECT(n == 1 && reason == JITUNWIND_STOP_UNREADABLE);

  jitunwind_sframe_table_destroy(table);
  free(bytes);
  return 0;
}
