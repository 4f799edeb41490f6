// SPDX-License-Identifier: GPL-2.0
// The shortest programs that count vfs_read calls of the processes named "threads"
// (tests/kernel/user/threads.c), one per way the kernel offers to run a program at a
// function's entry and return; benches/misses loads one kind at a time with kloader and
// compares what each counted with the calls made (issue 30: calls lost on Linux 7.2).
#include "mini_vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

extern bool bpf_session_is_return(void *ctx) __ksym __weak;

/* One struct: the loader reads .bss as these two counters, in this order. */
struct {
	__u64 entries, returns;
} counts;
#define entries counts.entries
#define returns counts.returns

static __always_inline bool traced(void)
{
	char comm[16];
	if (bpf_get_current_comm(comm, sizeof(comm)))
		return 0;
	return comm[0] == 't' && comm[1] == 'h' && comm[2] == 'r' && comm[3] == 'e' &&
	       comm[4] == 'a' && comm[5] == 'd' && comm[6] == 's' && comm[7] == 0;
}

/* kprobe.session: one program at entry and return, run with preemption off. */
SEC("kprobe.session/vfs_read")
int ksession(void *ctx)
{
	if (traced())
		__sync_fetch_and_add(bpf_session_is_return(ctx) ? &returns : &entries, 1);
	return 0;
}

/* One program that counts a traced call in `counter`, in section `sec`. */
#define COUNTER(name, sec, counter)                          \
	SEC(sec)                                             \
	int name(void *ctx)                                  \
	{                                                    \
		if (traced())                                \
			__sync_fetch_and_add(&counter, 1);   \
		return 0;                                    \
	}

/* kprobe + kretprobe, through kprobe_multi links. */
COUNTER(kentry, "kprobe.multi/vfs_read", entries)
COUNTER(kreturn, "kretprobe.multi/vfs_read", returns)

/* fentry + fexit: trampolines, run with migration off but preemptible. */
COUNTER(fentry, "fentry/vfs_read", entries)
COUNTER(fexit, "fexit/vfs_read", returns)

/* fentry + fexit whose bodies run with preemption off (kfuncs of Linux 6.10+): only the
 * trampoline's few instructions around the body stay preemptible. */
extern void bpf_preempt_disable(void) __ksym __weak;
extern void bpf_preempt_enable(void) __ksym __weak;

/* One program like COUNTER's whose body runs with preemption off. */
#define COUNTER_NP(name, sec, counter)                       \
	SEC(sec)                                             \
	int name(void *ctx)                                  \
	{                                                    \
		bpf_preempt_disable();                       \
		if (traced())                                \
			__sync_fetch_and_add(&counter, 1);   \
		bpf_preempt_enable();                        \
		return 0;                                    \
	}

COUNTER_NP(fentry_np, "fentry/vfs_read", entries)
COUNTER_NP(fexit_np, "fexit/vfs_read", returns)
