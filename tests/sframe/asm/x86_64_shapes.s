# Function shapes for the SFrame differential test against LLVM (llvm-mc-22 --gsframe).
# Only the CFI and the code sizes matter; the instructions are plausible but never run.
	.text
	.globl	fp_frame
	.type	fp_frame,@function
fp_frame:				# frame pointer, mid-function epilogue
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	subq	$32, %rsp
	testq	%rdi, %rdi
	jz	1f
	.cfi_remember_state
	leave
	.cfi_def_cfa %rsp, 8
	.cfi_restore %rbp
	ret
	.cfi_restore_state
1:	call	fp_frame
	leave
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	fp_frame, .-fp_frame

	.type	sp_frame,@function
sp_frame:				# pushes and an SP-only frame, no frame pointer
	.cfi_startproc
	pushq	%rbx
	.cfi_adjust_cfa_offset 8
	pushq	%r12
	.cfi_adjust_cfa_offset 8
	subq	$24, %rsp
	.cfi_adjust_cfa_offset 24
	call	sp_frame
	addq	$24, %rsp
	.cfi_adjust_cfa_offset -24
	popq	%r12
	.cfi_adjust_cfa_offset -8
	popq	%rbx
	.cfi_adjust_cfa_offset -8
	ret
	.cfi_endproc
	.size	sp_frame, .-sp_frame

	.type	frame_2byte,@function
frame_2byte:				# 2-byte CFA offsets, FP saved but not used as CFA base
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	subq	$304, %rsp
	.cfi_def_cfa_offset 320
	call	sp_frame
	addq	$304, %rsp
	.cfi_def_cfa_offset 16
	popq	%rbp
	.cfi_def_cfa_offset 8
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size	frame_2byte, .-frame_2byte

	.type	frame_4byte,@function
frame_4byte:				# 4-byte CFA offsets
	.cfi_startproc
	subq	$70000, %rsp
	.cfi_def_cfa_offset 70008
	call	sp_frame
	addq	$70000, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	frame_4byte, .-frame_4byte

	.type	long_300,@function
long_300:				# > 256 bytes: 2-byte FRE start addresses
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	.fill	300, 1, 0x90
	popq	%rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	long_300, .-long_300

	.type	long_70000,@function
long_70000:				# > 65536 bytes: 4-byte FRE start addresses
	.cfi_startproc
	subq	$8, %rsp
	.cfi_def_cfa_offset 16
	.fill	70000, 1, 0x90
	addq	$8, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	long_70000, .-long_70000

	.type	leaf,@function
leaf:
	.cfi_startproc
	leaq	1(%rdi), %rax
	ret
	.cfi_endproc
	.size	leaf, .-leaf

	.section .text.other,"ax",@progbits	# a second code section: FDEs relocate against it
	.type	other,@function
other:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	call	leaf
	popq	%rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	other, .-other
