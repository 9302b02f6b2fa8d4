# Functions with .cfi_* directives covering the shapes SFrame can describe. Assembled by
# llvm-mc-22 --gsframe in tests/cli/llvm_diff_test.cpp; our dump must agree with llvm-readobj-22.
	.text
	.globl	fp_frame
	.type	fp_frame,@function
fp_frame:                       # push rbp; mov rbp, rsp; ...; leave; ret (compiler style: no
	.cfi_startproc              # .cfi_restore, so the FP rule outlives the epilogue)
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	subq	$32, %rsp
	callq	sp_frame
	leave
	.cfi_def_cfa %rsp, 8
	retq
	.cfi_endproc
	.size	fp_frame, .-fp_frame

	.globl	sp_frame
	.type	sp_frame,@function
sp_frame:                       # pushes and sub rsp, no frame pointer
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	pushq	%r12
	.cfi_def_cfa_offset 24
	subq	$40, %rsp
	.cfi_def_cfa_offset 64
	callq	leaf
	addq	$40, %rsp
	.cfi_def_cfa_offset 24
	popq	%r12
	.cfi_def_cfa_offset 16
	popq	%rbx
	.cfi_def_cfa_offset 8
	retq
	.cfi_endproc
	.size	sp_frame, .-sp_frame

	.globl	leaf
	.type	leaf,@function
leaf:
	.cfi_startproc
	movl	%edi, %eax
	retq
	.cfi_endproc
	.size	leaf, .-leaf

	.globl	mid_epilogue
	.type	mid_epilogue,@function
mid_epilogue:                   # an early return in the middle, with remember/restore state
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	testl	%edi, %edi
	jne	1f
	.cfi_remember_state
	popq	%rbp
	.cfi_def_cfa %rsp, 8
	.cfi_restore %rbp
	retq
1:
	.cfi_restore_state
	callq	leaf
	popq	%rbp
	.cfi_def_cfa %rsp, 8
	.cfi_restore %rbp
	retq
	.cfi_endproc
	.size	mid_epilogue, .-mid_epilogue

	.globl	big_frame
	.type	big_frame,@function
big_frame:                      # > 255 bytes of code and a CFA offset > 127: 2-byte fields
	.cfi_startproc
	subq	$5000, %rsp
	.cfi_def_cfa_offset 5008
	.fill	300, 1, 0x90
	addq	$5000, %rsp
	.cfi_def_cfa_offset 8
	retq
	.cfi_endproc
	.size	big_frame, .-big_frame

	.globl	huge_frame
	.type	huge_frame,@function
huge_frame:                     # > 64 KiB of code and a CFA offset > 32767: 4-byte fields
	.cfi_startproc
	subq	$100000, %rsp
	.cfi_def_cfa_offset 100008
	.fill	70000, 1, 0x90
	addq	$100000, %rsp
	.cfi_def_cfa_offset 8
	retq
	.cfi_endproc
	.size	huge_frame, .-huge_frame

	.globl	thread_entry
	.type	thread_entry,@function
thread_entry:                   # outermost frame: the return address is undefined
	.cfi_startproc
	.cfi_undefined %rip
	xorl	%ebp, %ebp
	callq	leaf
	hlt
	.cfi_endproc
	.size	thread_entry, .-thread_entry
