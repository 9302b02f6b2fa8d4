/* The recipes of the C API from C11: rows for the common shapes, kept by the storage builder. */
#include <jitunwind/c/embed.h>

#include <string.h>

/* Fills `out` (up to 16 rows each) with the rows of each recipe for a 32-byte function at
   0x1000; returns 0, or the number of the failed step. */
int capi_c_recipes(jitunwind_frame_row out[4][16], size_t counts[4]) {
  jitunwind_error err;
  jitunwind_frame_builder* b = NULL;
  jitunwind_function f;
  const jitunwind_epilogue one = {29, 30};
  size_t i;
  if (jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) != JITUNWIND_OK) return 1;
  for (i = 0; i < 4; ++i) {
    jitunwind_status st = JITUNWIND_E_INVALID_ARGUMENT;
    switch (i) {
      case 0: st = jitunwind_frame_recipe_leaf(b, 0x1000, 32, &f, &err); break;
      case 1:
        st = jitunwind_frame_recipe_frame_pointer(b, 0x1000, 32, 1, 4, &one, 1, &f, &err);
        break;
      case 2: st = jitunwind_frame_recipe_sp_frame(b, 0x1000, 32, 4, 24, &one, 1, &f, &err); break;
      case 3: st = jitunwind_frame_recipe_trampoline(b, 0x1000, 32, 4, 8, 29, &f, &err); break;
    }
    if (st != JITUNWIND_OK || f.start != 0x1000 || f.size != 32 || f.row_count > 16)
      return 10 + (int)i;
    counts[i] = f.row_count;
    memcpy(out[i], f.rows, f.row_count * sizeof *f.rows);
  }
  /* errors: NULL epilogues with a count, an epilogue past the end, no storage */
  if (jitunwind_frame_recipe_frame_pointer(b, 0x1000, 32, 1, 4, NULL, 1, &f, &err) !=
      JITUNWIND_E_INVALID_ARGUMENT)
    return 20;
  {
    const jitunwind_epilogue late = {40, 41};
    if (jitunwind_frame_recipe_frame_pointer(b, 0x1000, 32, 1, 4, &late, 1, &f, &err) !=
        JITUNWIND_E_INVALID_ARGUMENT)
      return 21;
  }
  if (jitunwind_frame_recipe_leaf(NULL, 0x1000, 32, &f, &err) != JITUNWIND_E_INVALID_ARGUMENT)
    return 22;
  jitunwind_frame_builder_destroy(b);
  return 0;
}
