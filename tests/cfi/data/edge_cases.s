	.text
	.globl sig
	.type sig,@function
sig:
	.cfi_startproc
	.cfi_signal_frame
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	pop %rbp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size sig, .-sig

	.globl undefrbp
undefrbp:
	.cfi_startproc
	nop
	.cfi_undefined %rbp
	ret
	.cfi_endproc

	.globl regr10
regr10:
	.cfi_startproc
	lea 8(%rsp), %r10
	.cfi_def_cfa %r10, 0
	and $-16, %rsp
	pushq -8(%r10)
	ret
	.cfi_endproc

	.globl rbx_saved
rbx_saved:
	.cfi_startproc
	push %rbx
	.cfi_def_cfa_offset 16
	.cfi_offset %rbx, -16
	pop %rbx
	.cfi_def_cfa_offset 8
	.cfi_restore %rbx
	ret
	.cfi_endproc

	.globl escape
escape:
	.cfi_startproc
	nop
	.cfi_escape 0x0f, 0x03, 0x76, 0x78, 0x06
	nop
	ret
	.cfi_endproc

	.globl outer
outer:
	.cfi_startproc
	.cfi_undefined %rip
	nop
	ret
	.cfi_endproc

	.globl rbpreg
rbpreg:
	.cfi_startproc
	nop
	.cfi_register %rbp, %rax
	ret
	.cfi_endproc

	.globl samerbp
samerbp:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	nop
	.cfi_same_value %rbp
	pop %rbp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc

	.globl valoff
valoff:
	.cfi_startproc
	nop
	.cfi_val_offset %rbp, -16
	ret
	.cfi_endproc
	
	.globl rem
rem:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	mov %rsp,%rbp
	.cfi_def_cfa_register %rbp
	.cfi_remember_state
	pop %rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_restore_state
	nop
	leave
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
