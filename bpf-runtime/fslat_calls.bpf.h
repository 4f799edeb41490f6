/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Calls in flight: fentry mode's per-task stacks of entries, and the entry() values
 * kept with them.
 * Included by fslat.bpf.h, after its types and helpers.
 */
#ifndef FSLAT_CALLS_BPF_H
#define FSLAT_CALLS_BPF_H

/*
 * fentry mode: the calls of one session's function in flight on one task, innermost last,
 * each as its entry time and its context pointer. The context (the argument area of the
 * BPF trampoline's stack frame) is the same address at fentry and fexit of one call and
 * differs between calls in flight, so a return pops exactly its own entry: a call of the
 * same function nested in another on the same thread (recursion, or a softirq or
 * interrupt running on top of it) gets its own start time, and the return of a call that
 * the entry filter rejected (which pushed nothing) finds nothing to pop and leaves the
 * outer call's entry alone. Calls nested deeper than FSLAT_CALL_DEPTH are not kept
 * (counted unpaired); their returns find nothing either.
 *
 * The kernel may skip one of the two programs (from 5.12, a program that is entered again
 * on a CPU where it already runs, preempted or interrupted, is not run): an entry whose
 * fexit was skipped is dropped, counted unpaired, when an outer call returns past it or a
 * later call of the same frame enters.
 *
 * Kept in task storage (Linux 5.11+: found without a lookup by thread id, freed with the
 * task), else (FSLAT_HASH_CALLS, 5.10) in a hash map keyed by thread id, or for the idle
 * tasks (thread id 0 on every CPU) by CPU, whose entry goes when the stack is empty.
 */
#define FSLAT_CALL_DEPTH 16

/*
 * entry(EXPR): a program that uses it defines FSLAT_ENTRY_VALUES, the most values a session
 * saves; each call in flight keeps them next to its entry time.
 */
#ifndef FSLAT_ENTRY_VALUES
#define FSLAT_ENTRY_VALUES 0
#endif

struct fslat_calls {
	__u64 start[FSLAT_CALL_DEPTH]; /* entry times */
	__u64 call[FSLAT_CALL_DEPTH];  /* context pointers: which call */
	__u32 depth;                   /* entries in use */
	__u32 pad;
#if FSLAT_ENTRY_VALUES
	__u64 vals[FSLAT_CALL_DEPTH][FSLAT_ENTRY_VALUES]; /* entry() values */
#endif
};

#if FSLAT_ENTRY_VALUES
/* fsession mode: a call's entry() values, in a hash map keyed by its context pointer (the
 * cookie holds only the entry time). */
struct fslat_entry_vals {
	__u64 v[FSLAT_ENTRY_VALUES];
};
#endif

#ifndef FSLAT_HASH_CALLS
struct task_struct;

#define FSLAT_CALLS_MAP(name, entries)                                   \
	struct {                                                         \
		__uint(type, BPF_MAP_TYPE_TASK_STORAGE);                 \
		__uint(map_flags, BPF_F_NO_PREALLOC);                    \
		__type(key, int);                                        \
		__type(value, struct fslat_calls);                       \
	} name SEC(".maps")

static __always_inline struct fslat_calls *fslat_calls_get(void *map, bool create)
{
	return bpf_task_storage_get(map, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

static __always_inline void fslat_calls_empty(void *map)
{
}
#else
#define FSLAT_CALLS_MAP(name, entries)                                   \
	struct {                                                         \
		__uint(type, BPF_MAP_TYPE_HASH);                         \
		__uint(max_entries, entries);                            \
		__type(key, __u64);                                      \
		__type(value, struct fslat_calls);                       \
	} name SEC(".maps")

/* New stacks are inserted from here: the struct is big for the 512-byte BPF stack. */
struct fslat_calls fslat_calls_zero;

static __always_inline __u64 fslat_calls_key(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	return tid ? tid : (1ULL << 32) | bpf_get_smp_processor_id();
}

static __always_inline struct fslat_calls *fslat_calls_get(void *map, bool create)
{
	__u64 key = fslat_calls_key();
	struct fslat_calls *c = bpf_map_lookup_elem(map, &key);
	if (c || !create)
		return c;
	bpf_map_update_elem(map, &key, &fslat_calls_zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, &key);
}

/* The map holds only threads with calls in flight. */
static __always_inline void fslat_calls_empty(void *map)
{
	__u64 key = fslat_calls_key();
	bpf_map_delete_elem(map, &key);
}
#endif

/*
 * At entry of an accepted call: push it, with its entry() values (`vals`, NULL when the
 * session has none). Returns how many entries could not be kept or were found stale (0
 * when all is well), for the caller to count unpaired.
 */
static __always_inline __u32 fslat_enter(void *map, const void *ctx, __u64 start,
					 const __u64 *vals)
{
	struct fslat_calls *c = fslat_calls_get(map, true);
	if (!c)
		return 1;
	__u64 call = (__u64)ctx;
	__u32 d = c->depth;
	if (d > FSLAT_CALL_DEPTH)
		d = FSLAT_CALL_DEPTH;
	/* An entry of this very frame belongs to a call that returned unseen: it and what
	 * was pushed after it are stale. */
	__u32 lost = 0;
	for (__u32 i = 0; i < FSLAT_CALL_DEPTH; i++) {
		if (i >= d)
			break;
		if (c->call[i] == call) {
			lost = d - i;
			d = i;
			break;
		}
	}
	if (d >= FSLAT_CALL_DEPTH)
		return lost + 1;
	/* The mask is a no-op the verifier of 5.10 needs to see the index bounded. */
	c->start[d & (FSLAT_CALL_DEPTH - 1)] = start;
	c->call[d & (FSLAT_CALL_DEPTH - 1)] = call;
#if FSLAT_ENTRY_VALUES
	if (vals)
		for (__u32 v = 0; v < FSLAT_ENTRY_VALUES; v++)
			c->vals[d & (FSLAT_CALL_DEPTH - 1)][v] = vals[v];
#endif
	c->depth = d + 1;
	return lost;
}

/*
 * At return: this call's entry time, or 0 when it has none (rejected at entry, nested too
 * deep, or its fentry skipped), and its entry() values into `vals` (NULL: none). Entries
 * above its own are stale: *lost counts them.
 */
static __always_inline __u64 fslat_leave(void *map, const void *ctx, __u32 *lost, __u64 *vals)
{
	struct fslat_calls *c = fslat_calls_get(map, false);
	if (!c)
		return 0;
	__u64 call = (__u64)ctx;
	__u32 d = c->depth;
	if (d > FSLAT_CALL_DEPTH)
		d = FSLAT_CALL_DEPTH;
	for (__u32 i = 0; i < FSLAT_CALL_DEPTH; i++) {
		if (i >= d)
			break;
		__u32 k = (d - 1 - i) & (FSLAT_CALL_DEPTH - 1);
		if (c->call[k] == call) {
			__u64 start = c->start[k];
#if FSLAT_ENTRY_VALUES
			if (vals)
				for (__u32 v = 0; v < FSLAT_ENTRY_VALUES; v++)
					vals[v] = c->vals[k][v];
#endif
			*lost = i;
			c->depth = k;
			if (!k)
				fslat_calls_empty(map);
			return start;
		}
	}
	return 0;
}

#endif /* FSLAT_CALLS_BPF_H */
