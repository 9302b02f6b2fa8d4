/* Register rules (SFrame v3 flexible FDEs) from C11: a stack-realigning (DRAP) function's rows,
   named with the on-ramp, read back from this process's registry as a profiler would and
   decoded with their registers. Compiled as C11 -pedantic; driven by register_rules_test.cpp. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, getpid under -std=c11 */
#include <jitunwind/jitunwind.h>

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "expect_c.h"

/* entry; CFA = r10 + 0 from 4; CFA = *(rbp - 8), caller's rbp at *(rbp + 0) from 16. The fields:
   pc_offset, cfa_base, ra_rule, fp_rule, ra_mangled, cfa_reg, cfa_deref, ra_reg, fp_reg,
   cfa_offset, ra_offset, fp_offset. */
static const jitunwind_frame_row drap_rows[3] = {
    {0, JITUNWIND_CFA_SP, JITUNWIND_RA_SAVED, JITUNWIND_FP_UNCHANGED, 0, 0, 0, 0, 0, 8, -8, 0},
    {4, JITUNWIND_CFA_REG, JITUNWIND_RA_SAVED, JITUNWIND_FP_UNCHANGED, 0, 10, 0, 0, 0, 0, -8, 0},
    {16, JITUNWIND_CFA_FP, JITUNWIND_RA_SAVED, JITUNWIND_FP_REGISTER_SAVED, 0, 0, 1, 0, 6, -8, -8,
     0}};

/* Returns 0, or 1 with `msg`. */
int capi_c_register_rules_name_code(char* msg, size_t len) {
  jitunwind_error err;
  jitunwind_remote_window* windows = NULL;
  size_t count = 0, i;
  uint8_t* sframe = NULL;
  size_t sframe_size = 0;
  jitunwind_sframe_decoded* d = NULL;
  int rc = 1;
  unsigned char* code =
      mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  msg[0] = '\0';
  EXPECT(code != MAP_FAILED, "mmap failed");
  memset(code, 0xcc, 48);
  EXPECT(jitunwind_name_code(code, 48, "c:drap", drap_rows, 3, &err) == JITUNWIND_OK,
         "name_code: %s", err.message);
  EXPECT(jitunwind_remote_read_registry((int)getpid(), &windows, &count, &err) == JITUNWIND_OK,
         "read_registry: %s", err.message);
  for (i = 0; i < count; ++i)
    if (windows[i].text_start == (uint64_t)(uintptr_t)code &&
        windows[i].state == JITUNWIND_REMOTE_WINDOW_LIVE)
      break;
  EXPECT(i < count, "no live registry window at %p", (void*)code);
  EXPECT(jitunwind_remote_read_sframe((int)getpid(), &windows[i], &sframe, &sframe_size, &err) ==
             JITUNWIND_OK,
         "read_sframe: %s", err.message);
  EXPECT(jitunwind_sframe_decode(sframe, sframe_size, windows[i].sframe_address, &d, &err) ==
             JITUNWIND_OK,
         "decode: %s", err.message);
  EXPECT(d->info.version == 3 && d->info.num_fdes == 1 && d->functions[0].row_count == 3,
         "decoded: v%u, %u functions", (unsigned)d->info.version, (unsigned)d->info.num_fdes);
  EXPECT((d->functions[0].flags & JITUNWIND_FUNCTION_REGISTER_RULES) != 0,
         "no REGISTER_RULES flag");
  for (i = 0; i < 3; ++i) {
    const jitunwind_frame_row* r = &d->functions[0].rows[i];
    EXPECT(memcmp(r, &drap_rows[i], sizeof *r) == 0,
           "row %zu: cfa_reg %u deref %u ra_reg %u fp_reg %u", i, (unsigned)r->cfa_reg,
           (unsigned)r->cfa_deref, (unsigned)r->ra_reg, (unsigned)r->fp_reg);
  }
  rc = 0;
out:
  jitunwind_sframe_decoded_free(d);
  jitunwind_remote_free(sframe);
  jitunwind_remote_free(windows);
  if (code != MAP_FAILED) {
    (void)jitunwind_forget_code(code, NULL);
    munmap(code, 4096);
  }
  return rc;
}
