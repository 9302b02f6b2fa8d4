/* Benchmark layout variants (see CMakeLists.txt): TOYINTERP_LAYOUT_PAD bytes of code linked
 * ahead of the interpreter's objects, so that every function and branch target after it moves
 * by that many bytes. Never called. */
#ifndef TOYINTERP_LAYOUT_PAD
#error "TOYINTERP_LAYOUT_PAD must be defined"
#endif
  .text
  .globl toyinterp_layout_pad
  .type toyinterp_layout_pad, @function
toyinterp_layout_pad:
  .cfi_startproc
  .fill TOYINTERP_LAYOUT_PAD - 1, 1, 0x90
  ret
  .cfi_endproc
  .size toyinterp_layout_pad, . - toyinterp_layout_pad
  .section .note.GNU-stack, "", @progbits
