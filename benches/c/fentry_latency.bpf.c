// SPDX-License-Identifier: GPL-2.0
// The same tool as fsession_latency.bpf.c written the classic way
// (shared/reference/fentry-fexit-latency-tutorial.txt): fentry stores the entry time
// in a hash map keyed by thread id, fexit looks it up, deletes it and acts. Same
// settings, counters and event as the fsession tool, so one loader runs both.
#include "mini_vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "latency.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u64 threshold_ns;
const volatile __u32 target_tgid;

struct latency_stats stats;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);   /* thread id */
	__type(value, __u64); /* entry time, ns */
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

SEC("fentry/vfs_read")
int BPF_PROG(enter_vfs_read, struct file *file, char *buf, size_t count, loff_t *pos)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	__u64 ts;

	if (target_tgid && pid_tgid >> 32 != target_tgid)
		return 0;
	ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&starts, &tid, &ts, BPF_ANY);
	return 0;
}

SEC("fexit/vfs_read")
int BPF_PROG(exit_vfs_read, struct file *file, char *buf, size_t count, loff_t *pos,
	     ssize_t ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct latency_event *event;
	__u64 *started, latency;

	started = bpf_map_lookup_elem(&starts, &tid);
	if (!started)
		return 0;
	latency = bpf_ktime_get_ns() - *started;
	bpf_map_delete_elem(&starts, &tid);

	__sync_fetch_and_add(&stats.calls, 1);
	if (ret < 0)
		__sync_fetch_and_add(&stats.errors, 1);
	if (latency < threshold_ns)
		return 0;

	__sync_fetch_and_add(&stats.slow, 1);
	event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
	if (!event) {
		__sync_fetch_and_add(&stats.dropped, 1);
		return 0;
	}

	event->pid = tid;
	event->tgid = pid_tgid >> 32;
	event->requested = count;
	event->result = ret;
	event->latency_ns = latency;
	bpf_get_current_comm(event->comm, sizeof(event->comm));
	bpf_ringbuf_submit(event, 0);
	return 0;
}
