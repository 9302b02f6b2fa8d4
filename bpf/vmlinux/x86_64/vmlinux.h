/* The kernel types walker.bpf.c uses, for x86-64: written by hand instead of dumped from the
 * build machine's kernel (bpftool btf dump), so that the BPF object is the same wherever it is
 * built. Only what the program names is here:
 *   - the fixed-width types and the bpf UAPI constants (stable ABI, values from
 *     include/uapi/linux/bpf.h);
 *   - struct pt_regs and struct bpf_perf_event_data, whose layout is ABI on x86-64 (the
 *     verifier checks context accesses against it; the register names are the kernel's);
 *   - the kernel-internal structures the program reads through CO-RE (task_struct, ...): marked
 *     preserve_access_index and reduced to the fields it reads, which libbpf relocates by name
 *     against the running kernel's BTF at load time. A field walker.bpf.c starts to read is
 *     added here (the build fails until it is).
 * Other architectures get their own bpf/vmlinux/<arch>/vmlinux.h (docs/architecture.md). */
#ifndef __VMLINUX_H__
#define __VMLINUX_H__

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };
typedef int pid_t;
typedef long long __kernel_loff_t;

enum bpf_map_type {
  BPF_MAP_TYPE_HASH = 1,
  BPF_MAP_TYPE_ARRAY = 2,
  BPF_MAP_TYPE_PERCPU_ARRAY = 6,
  BPF_MAP_TYPE_STACK_TRACE = 7,
  BPF_MAP_TYPE_ARRAY_OF_MAPS = 12,
  BPF_MAP_TYPE_RINGBUF = 27,
};

/* bpf_map_update_elem flags */
enum {
  BPF_ANY = 0,
  BPF_NOEXIST = 1,
  BPF_EXIST = 2,
};

/* map_flags */
enum {
  BPF_F_MMAPABLE = 1024,
  BPF_F_INNER_MAP = 4096,
};

/* bpf_get_stack / bpf_get_stackid flags */
enum {
  BPF_F_USER_STACK = 256,
};

/* x86-64: the layout of struct user_regs_struct, with the kernel's names. */
struct pt_regs {
  unsigned long r15;
  unsigned long r14;
  unsigned long r13;
  unsigned long r12;
  unsigned long bp;
  unsigned long bx;
  unsigned long r11;
  unsigned long r10;
  unsigned long r9;
  unsigned long r8;
  unsigned long ax;
  unsigned long cx;
  unsigned long dx;
  unsigned long si;
  unsigned long di;
  unsigned long orig_ax;
  unsigned long ip;
  unsigned long cs;
  unsigned long flags;
  unsigned long sp;
  unsigned long ss;
} __attribute__((preserve_access_index));

typedef struct pt_regs bpf_user_pt_regs_t;

struct bpf_perf_event_data {
  bpf_user_pt_regs_t regs;
  __u64 sample_period;
  __u64 addr;
};

typedef struct {
  int counter;
} atomic_t;

struct signal_struct {
  atomic_t live;
} __attribute__((preserve_access_index));

struct task_struct {
  unsigned int flags; /* PF_*: a sample's task that is exiting (sampled_task) */
  pid_t pid;
  pid_t tgid;
  struct signal_struct* signal;
} __attribute__((preserve_access_index));

struct linux_binprm;

/* bpf_find_vma's callback reads the flags of the mapping an address is in. */
struct vm_area_struct {
  unsigned long vm_start;
  unsigned long vm_end;
  unsigned long vm_flags;
} __attribute__((preserve_access_index));

#endif /* __VMLINUX_H__ */
