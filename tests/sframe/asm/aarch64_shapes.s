// AArch64 function shapes for the SFrame differential test against LLVM (llvm-mc-22 --gsframe).
// LLVM 22.1's SFrame emitter has the AArch64 registers mixed up (it takes DWARF 29 as the
// return-address column and 30 as the frame pointer, and expects `.cfi_return_column 29`), so
// without the workaround below it drops every AArch64 function with "non-default RA register".
// With `.cfi_return_column 29`, `.cfi_offset x29`/`x30` come out in the spec's RA-then-FP
// order, but an x29-based CFA is rejected: `fp_based` below names x30 to get an FP-based FRE.
// The test compares our decoder with llvm-readobj on these bytes, whatever LLVM meant.
	.text
	.globl	leaf
	.type	leaf,@function
leaf:
	.cfi_startproc
	.cfi_return_column 29
	add	x0, x0, #1
	ret
	.cfi_endproc
	.size	leaf, .-leaf

	.type	framed,@function
framed:					// stp x29, x30 frame with a mid-function epilogue
	.cfi_startproc
	.cfi_return_column 29
	stp	x29, x30, [sp, #-32]!
	.cfi_def_cfa_offset 32
	.cfi_offset x30, -24
	.cfi_offset x29, -32
	mov	x29, sp
	cbz	x0, 1f
	.cfi_remember_state
	ldp	x29, x30, [sp], #32
	.cfi_def_cfa_offset 0
	.cfi_restore x30
	.cfi_restore x29
	ret
	.cfi_restore_state
1:	bl	leaf
	ldp	x29, x30, [sp], #32
	.cfi_def_cfa_offset 0
	.cfi_restore x30
	.cfi_restore x29
	ret
	.cfi_endproc
	.size	framed, .-framed

	.type	frame_2byte,@function
frame_2byte:
	.cfi_startproc
	.cfi_return_column 29
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset x30, -8
	.cfi_offset x29, -16
	sub	sp, sp, #4096
	.cfi_def_cfa_offset 4112
	bl	leaf
	add	sp, sp, #4096
	.cfi_def_cfa_offset 16
	ldp	x29, x30, [sp], #16
	.cfi_def_cfa_offset 0
	.cfi_restore x30
	.cfi_restore x29
	ret
	.cfi_endproc
	.size	frame_2byte, .-frame_2byte

	.type	frame_4byte,@function
frame_4byte:
	.cfi_startproc
	.cfi_return_column 29
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset x30, -8
	.cfi_offset x29, -16
	sub	sp, sp, #17, lsl #12
	.cfi_def_cfa_offset 69648
	bl	leaf
	add	sp, sp, #17, lsl #12
	.cfi_def_cfa_offset 16
	ldp	x29, x30, [sp], #16
	.cfi_def_cfa_offset 0
	.cfi_restore x30
	.cfi_restore x29
	ret
	.cfi_endproc
	.size	frame_4byte, .-frame_4byte

	.type	fp_based,@function
fp_based:
	.cfi_startproc
	.cfi_return_column 29
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset x30, -8
	.cfi_offset x29, -16
	mov	x29, sp
	.cfi_def_cfa x30, 16
	bl	leaf
	ldp	x29, x30, [sp], #16
	.cfi_def_cfa sp, 0
	.cfi_restore x30
	.cfi_restore x29
	ret
	.cfi_endproc
	.size	fp_based, .-fp_based

	.type	long_400,@function
long_400:				// > 256 bytes: 2-byte FRE start addresses
	.cfi_startproc
	.cfi_return_column 29
	sub	sp, sp, #16
	.cfi_def_cfa_offset 16
	.rept	100
	nop
	.endr
	add	sp, sp, #16
	.cfi_def_cfa_offset 0
	ret
	.cfi_endproc
	.size	long_400, .-long_400

	.type	long_68000,@function
long_68000:				// > 65536 bytes: 4-byte FRE start addresses
	.cfi_startproc
	.cfi_return_column 29
	sub	sp, sp, #16
	.cfi_def_cfa_offset 16
	.rept	17000
	nop
	.endr
	add	sp, sp, #16
	.cfi_def_cfa_offset 0
	ret
	.cfi_endproc
	.size	long_68000, .-long_68000
