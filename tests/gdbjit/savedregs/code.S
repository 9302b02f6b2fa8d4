// Two functions for the saved-registers test (savedregs.cpp), with the CFI a compiler writes.
//
// jit_template is never called where it is: the test copies its bytes into a JIT window and
// describes the copy with the rows decoded from this object's .eh_frame. It saves rbx and r12,
// clobbers them, calls the native function whose address it gets in rdi, and restores them.
// call_with_rbx puts known values in rbx and r12 and calls the JIT copy: in gdb, its frame
// must show those values, which only the JIT frame's CFI (rbx/r12 saved at CFA-16/-24) can
// tell.
        .text
        .globl jit_template
        .type jit_template, @function
jit_template:
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        push %r12
        .cfi_def_cfa_offset 24
        .cfi_offset %r12, -24
        sub $8, %rsp
        .cfi_def_cfa_offset 32
        xor %ebx, %ebx
        xor %r12d, %r12d
        call *%rdi
        add $8, %rsp
        .cfi_def_cfa_offset 24
        pop %r12
        .cfi_restore %r12
        .cfi_def_cfa_offset 16
        pop %rbx
        .cfi_restore %rbx
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size jit_template, .-jit_template

        .globl call_with_rbx
        .type call_with_rbx, @function
// uint64_t call_with_rbx(void (*jit)(void (*)()), void (*native)()): returns rbx after the call.
call_with_rbx:
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        push %r12
        .cfi_def_cfa_offset 24
        .cfi_offset %r12, -24
        sub $8, %rsp
        .cfi_def_cfa_offset 32
        movabs $0x1122334455667788, %rbx
        movabs $0x0badc0ffee0ddf00, %r12
        mov %rdi, %rax
        mov %rsi, %rdi
        call *%rax
        mov %rbx, %rax
        add $8, %rsp
        .cfi_def_cfa_offset 24
        pop %r12
        .cfi_def_cfa_offset 16
        pop %rbx
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size call_with_rbx, .-call_with_rbx
        .section .note.GNU-stack,"",@progbits
