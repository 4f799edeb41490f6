// SPDX-License-Identifier: GPL-2.0
// The hand-written C uprobe-session tool of the user-space benchmark (benches/user): what
// `fslat -e 'session FILE:work { hist(latency) }'` does, written by hand: one uprobe
// session program, the entry time in the session cookie, a log2 histogram of
// microseconds and a call count.
#include "mini_vmlinux.h"
#include <bpf/bpf_helpers.h>

enum { BPF_MAP_TYPE_ARRAY = 2 };

char LICENSE[] SEC("license") = "GPL";

extern bool bpf_session_is_return(void *ctx) __ksym;
extern __u64 *bpf_session_cookie(void *ctx) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} hist SEC(".maps");

__u64 calls;

static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

SEC("uprobe.session")
int measure(void *ctx)
{
	__u64 *cookie = bpf_session_cookie(ctx);
	if (!bpf_session_is_return(ctx)) {
		*cookie = bpf_ktime_get_ns();
		return 0;
	}
	__u64 us = (bpf_ktime_get_ns() - *cookie) / 1000;
	__u32 slot = us ? 1 + log2_slot(us) : 0;
	__u64 *n = bpf_map_lookup_elem(&hist, &slot);
	if (n)
		__sync_fetch_and_add(n, 1);
	__sync_fetch_and_add(&calls, 1);
	return 0;
}
