// SPDX-License-Identifier: GPL-2.0
// The exact floor of issue 42's matrix rows on Linux 7.2: for each row, the shortest
// hand-written program on a kprobe path (kprobe_multi, kretprobe_multi, kprobe session),
// whose handlers run the program with preemption off, so no call is skipped (issue 30).
// What a row costs here is the least any exact tool can pay for it on this kernel.
// benches/matrix.sh loads one program at a time with kloader (rows c_*).
#include "mini_vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

/* The uapi's values (mini_vmlinux.h has only what the seed's tools use). */
enum { BPF_MAP_TYPE_PERCPU_HASH = 5, BPF_MAP_TYPE_PERCPU_ARRAY = 6 };
enum { BPF_NOEXIST = 1 };

extern bool bpf_session_is_return(void *ctx) __ksym __weak;
extern __u64 *bpf_session_cookie(void *ctx) __ksym __weak;

/* x86-64 pt_regs, as the kprobe handlers fill it: rdx is the third argument (`count`),
 * rax the return value. */
struct regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip,
		cs, flags, sp, ss;
};

/* One per-CPU slot: a program that runs with preemption off adds to it without an atomic. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} one SEC(".maps");

/* `@[comm]`: bpftrace's map for a keyed count or sum, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, char[16]);
	__type(value, __u64);
} by_comm SEC(".maps");

static __always_inline void add_one(__u64 v)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&one, &zero);
	if (n)
		*n += v;
}

static __always_inline void add_comm(__u64 v)
{
	char comm[16] = {};
	bpf_get_current_comm(comm, sizeof(comm));
	__u64 *n = bpf_map_lookup_elem(&by_comm, comm);
	if (n)
		*n += v;
	else
		bpf_map_update_elem(&by_comm, comm, &v, BPF_NOEXIST);
}

/* `count()`: a kprobe at entry. */
SEC("kprobe.multi/vfs_read")
int c_kcount(void *ctx)
{
	add_one(1);
	return 0;
}

/* `count() by comm`: a kprobe at entry, a per-CPU hash keyed by comm. */
SEC("kprobe.multi/vfs_read")
int c_kcomm(void *ctx)
{
	add_comm(1);
	return 0;
}

/* `sum(count) by comm`: the same, adding the third argument. */
SEC("kprobe.multi/vfs_read")
int c_ksum(struct regs *ctx)
{
	add_comm(ctx->dx);
	return 0;
}

/* `where ret < 0 { count() }`: a kretprobe at return, the sign of rax. */
SEC("kretprobe.multi/vfs_read")
int c_kret_lt0(struct regs *ctx)
{
	if ((long)ctx->ax < 0)
		add_one(1);
	return 0;
}

/* `where latency > 10s { emit }`, as the seed's C fsession tool does it (its calls and
 * errors counters, a ring buffer event for a slow call) on a kprobe session: the entry
 * time in the session cookie. A kprobe cannot read `count` at return (rdx is gone), and
 * the event carries it: saving it costs an exact tool more (fslat keeps it on the task's
 * stack). This floor leaves it out (the event says 0), so it is a lower bound. */
#define THRESHOLD_NS 10000000000ULL

struct event {
	__u32 pid, tgid;
	__u64 requested;
	__s64 result;
	__u64 latency_ns;
	char comm[16];
};

struct {
	__u64 calls, slow, errors, dropped;
} stats;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

SEC("kprobe.session/vfs_read")
int c_ksession_slow(struct regs *ctx)
{
	__u64 *started = bpf_session_cookie(ctx);
	if (!bpf_session_is_return(ctx)) {
		*started = bpf_ktime_get_ns();
		return 0;
	}
	__u64 latency = bpf_ktime_get_ns() - *started;
	__sync_fetch_and_add(&stats.calls, 1);
	if ((long)ctx->ax < 0)
		__sync_fetch_and_add(&stats.errors, 1);
	if (latency < THRESHOLD_NS)
		return 0;
	__sync_fetch_and_add(&stats.slow, 1);
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&stats.dropped, 1);
		return 0;
	}
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	e->pid = (__u32)pid_tgid;
	e->tgid = pid_tgid >> 32;
	e->requested = 0;
	e->result = (long)ctx->ax;
	e->latency_ns = latency;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}
