// Records every argument of a USDT probe with libbpf's bpf_usdt_arg(), which decodes the
// note's argument specs ("-4@%edi", "8@16(%rsp)") itself: the test compares what it reads with
// what the process passed.
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/usdt.bpf.h>

struct record {
  __u64 hits;
  __s64 arg_count;
  __s64 rc[12];
  long args[12];
  char strings[12][16];
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct record);
} records SEC(".maps");

SEC("usdt")
int record_args(struct pt_regs *ctx) {
  __u32 key = 0;
  struct record *r = bpf_map_lookup_elem(&records, &key);
  if (!r) return 0;
  r->arg_count = bpf_usdt_arg_cnt(ctx);
#pragma unroll
  for (int i = 0; i < 12; i++) {
    long v = 0;
    r->rc[i] = bpf_usdt_arg(ctx, i, &v);
    r->args[i] = v;
    // Every argument is tried as a string pointer; only the string one succeeds.
    if (r->rc[i] == 0) bpf_probe_read_user_str(r->strings[i], sizeof(r->strings[i]), (void *)v);
  }
  __sync_fetch_and_add(&r->hits, 1);
  return 0;
}

char LICENSE[] SEC("license") = "GPL";
