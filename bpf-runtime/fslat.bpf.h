/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every program fslat generates includes: the base types, libbpf's BPF-side
 * headers, the fsession kfuncs and a few helpers. Kernel structs are not here: each
 * program declares just the members it reads (CO-RE relocates them against the running
 * kernel), so clang compiles a few hundred lines instead of a 3 MB vmlinux.h.
 */
#ifndef FSLAT_BPF_H
#define FSLAT_BPF_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0
#define NULL ((void *)0)

/* UAPI constants (include/uapi/linux/bpf.h); their values are ABI. */
enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_STACK_TRACE = 7,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};
enum {
	BPF_F_NO_PREALLOC = 1,
};
enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/*
 * Session kfuncs (resolved at load time): Linux 7.0 gave them the program's context for
 * fsession; the uprobe and kprobe sessions of 6.13 to 6.19 have them without it.
 */
#ifdef FSLAT_SESSION_KFUNCS_VOID
extern bool bpf_session_is_return(void) __ksym __weak;
extern __u64 *bpf_session_cookie(void) __ksym __weak;
#define FSLAT_SESSION_IS_RETURN(ctx) bpf_session_is_return()
#define FSLAT_SESSION_COOKIE(ctx) bpf_session_cookie()
#else
extern bool bpf_session_is_return(void *ctx) __ksym __weak;
extern __u64 *bpf_session_cookie(void *ctx) __ksym __weak;
#define FSLAT_SESSION_IS_RETURN(ctx) bpf_session_is_return(ctx)
#define FSLAT_SESSION_COOKIE(ctx) bpf_session_cookie(ctx)
#endif

/*
 * A user-space function's registers as its uprobe sees them: x86-64's struct pt_regs
 * (arch/x86/include/asm/ptrace.h), whose layout is the kernel's ABI for these programs.
 */
struct fslat_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

/*
 * A user-space call in flight: its thread and its stack pointer at entry. At return the
 * stack pointer is 8 bytes higher (`ret` popped the return address), so a call is found
 * again exactly, nested and recursive calls each their own.
 */
struct fslat_ucall {
	__u64 pid_tgid;
	__u64 sp;
};

char LICENSE[] SEC("license") = "GPL";

/*
 * The id of the current task's cgroup v2 ancestor at depth `level` (the root is 0; the
 * task's own cgroup when that is its depth), 0 when the task's cgroup is higher up: what
 * `under()` and --cgroup compare. Linux 5.10 refuses bpf_get_current_ancestor_cgroup_id
 * in tracing programs ("unknown func"); there (FSLAT_CGROUP_WALK: kernels before
 * bpf_loop, 5.17) the task's default-hierarchy cgroup is read with CO-RE, as the helper
 * does: its ancestor_ids[level] (ancestor_ids became ancestors[] only in 6.0).
 */
#ifdef FSLAT_CGROUP_WALK
struct cgroup___fslat {
	int level;
	__u64 ancestor_ids[];
} __attribute__((preserve_access_index));
struct css_set___fslat {
	struct cgroup___fslat *dfl_cgrp;
} __attribute__((preserve_access_index));
struct task_struct___fslat {
	struct css_set___fslat *cgroups;
} __attribute__((preserve_access_index));

static __always_inline __u64 fslat_ancestor_cgroup_id(__u32 level)
{
	struct task_struct___fslat *t = (void *)bpf_get_current_task();
	struct cgroup___fslat *c = BPF_CORE_READ(t, cgroups, dfl_cgrp);
	__u64 id = 0;

	if (!c || (int)level > BPF_CORE_READ(c, level))
		return 0;
	bpf_probe_read_kernel(&id, sizeof(id),
			      (char *)c + bpf_core_field_offset(c->ancestor_ids) + level * sizeof(__u64));
	return id;
}
#else
static __always_inline __u64 fslat_ancestor_cgroup_id(__u32 level)
{
	return bpf_get_current_ancestor_cgroup_id(level);
}
#endif

/*
 * Reads a NUL-terminated string from kernel memory, or from user memory when the
 * pointer is a user address (parameters such as `const char __user *filename`).
 */
static __always_inline void fslat_read_str(char *dst, __u32 size, const void *src)
{
	if (bpf_probe_read_kernel_str(dst, size, src) < 0 &&
	    bpf_probe_read_user_str(dst, size, src) < 0)
		dst[0] = 0;
}

/*
 * str(ptr, len): at most len bytes (and at most size - 1) from src, up to a NUL, then a
 * NUL. A `__user` pointer (BTF type tag) is read as user memory; any other pointer as
 * kernel memory first, then user memory (x86 refuses kernel reads of user addresses).
 */
static __always_inline void fslat_read_strn(char *dst, __u32 size, const void *src, __u64 len,
					    bool user)
{
	__u32 n = len < size ? (__u32)len + 1 : size;
	if (n > size) /* never: tells the 5.10 verifier the bound */
		n = size;
	if (user) {
		if (bpf_probe_read_user_str(dst, n, src) < 0)
			dst[0] = 0;
		return;
	}
	if (bpf_probe_read_kernel_str(dst, n, src) < 0 && bpf_probe_read_user_str(dst, n, src) < 0)
		dst[0] = 0;
}

/*
 * A user-space session's reads by DWARF offsets: a pointer, and a value of `size` bytes
 * (1, 2, 4 or 8; a constant at every call), 0 when the memory cannot be read.
 */
static __always_inline __u64 fslat_user_ptr(__u64 addr)
{
	__u64 v = 0;
	bpf_probe_read_user(&v, sizeof(v), (const void *)addr);
	return v;
}

static __always_inline __u64 fslat_user_read(__u64 addr, __u32 size)
{
	__u64 v = 0;
	bpf_probe_read_user(&v, size, (const void *)addr);
	return v;
}

/* Compares two NUL-terminated strings over at most n bytes. */
static __always_inline bool fslat_streq(const char *a, const char *b, __u32 n)
{
	for (__u32 i = 0; i < n; i++) {
		if (a[i] != b[i])
			return false;
		if (!a[i])
			return true;
	}
	return true;
}

/* Signed division without BPF's signed-division instruction (needs cpu v4). */
static __always_inline __s64 fslat_sdiv(__s64 a, __s64 b)
{
	__u64 q = (__u64)(a < 0 ? -a : a) / (__u64)(b < 0 ? -b : b);
	return (a < 0) != (b < 0) ? -(__s64)q : (__s64)q;
}

static __always_inline __s64 fslat_smod(__s64 a, __s64 b)
{
	__u64 r = (__u64)(a < 0 ? -a : a) % (__u64)(b < 0 ? -b : b);
	return a < 0 ? -(__s64)r : (__s64)r;
}

/* Index of the highest set bit plus one: 0 for 0, 1 for 1, 2 for 2..3, ... */
static __always_inline __u32 fslat_log2_bucket(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { v >>= 1; r += 1; }
	return r + (__u32)v;
}

/* Aggregation values. count, sum, min, max and avg share one layout. */
struct fslat_stat {
	__u64 count;
	__s64 sum;
	__s64 min;
	__s64 max;
};

/* slots[0]: negative values; slots[1]: 0; slots[k + 1]: [2^(k-1), 2^k). sum: of the
 * values (a histogram's `_sum` for --listen and --otlp). */
#define FSLAT_HIST_SLOTS 66
struct fslat_hist {
	__u64 slots[FSLAT_HIST_SLOTS];
	__s64 sum;
};

/* A zero histogram to insert new keys from: too big for the 512-byte BPF stack. */
struct fslat_hist fslat_hist_zero;

/* count(): the count alone (min, max and sum are not shown). */
static __always_inline void fslat_stat_count(struct fslat_stat *s, __s64 x)
{
	(void)x;
	__sync_fetch_and_add(&s->count, 1);
}

/* sum(), avg(), stats(): count and sum (min and max are not shown). */
static __always_inline void fslat_stat_sum(struct fslat_stat *s, __s64 x)
{
	__sync_fetch_and_add(&s->count, 1);
	/* Adding a constant 0 would become an atomic or: not on 5.10. */
	if (x)
		__sync_fetch_and_add(&s->sum, x);
}

#ifdef FSLAT_NO_ATOMICS
/*
 * Kernels before 5.12 (BPF atomics) have only the plain atomic add, whose result is never
 * used here (clang then emits that form, not a fetching one). min and max are compared and
 * stored plainly: when two CPUs update the same key at the same instant, one of the two
 * values may be lost from min or max. count and sum stay exact.
 */
static __always_inline void fslat_stat_add(struct fslat_stat *s, __s64 x)
{
	__sync_fetch_and_add(&s->count, 1);
	/* Adding a constant 0 (count()) would become an atomic or: not on 5.10. */
	if (x)
		__sync_fetch_and_add(&s->sum, x);
	if (x < s->min)
		s->min = x;
	if (x > s->max)
		s->max = x;
}
#else
static __always_inline void fslat_stat_add(struct fslat_stat *s, __s64 x)
{
	__sync_fetch_and_add(&s->count, 1);
	if (x)
		__sync_fetch_and_add(&s->sum, x);
	/* Bounded compare-and-swap: concurrent updates of one key retry a few times. */
	for (int i = 0; i < 4; i++) {
		__s64 old = s->min;
		if (x >= old || __sync_val_compare_and_swap(&s->min, old, x) == old)
			break;
	}
	for (int i = 0; i < 4; i++) {
		__s64 old = s->max;
		if (x <= old || __sync_val_compare_and_swap(&s->max, old, x) == old)
			break;
	}
}
#endif

static __always_inline void fslat_hist_add(struct fslat_hist *h, __s64 x)
{
	__u32 slot = x < 0 ? 0 : 1 + fslat_log2_bucket((__u64)x);
	if (slot < FSLAT_HIST_SLOTS)
		__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->sum, x);
}

/*
 * lhist: slot 0 counts values below min, slot 1 + (x - min) / step the n buckets, slot
 * n + 1 the values from min + n * step up. `slots` has n + 2 entries.
 */
static __always_inline void fslat_lhist_add(__u64 *slots, __s64 *sum, __s64 x, __s64 min,
					    __u64 step, __u64 n)
{
	__u64 slot;
	if (x < min)
		slot = 0;
	else if ((__u64)(x - min) >= n * step)
		slot = n + 1;
	else
		slot = 1 + (__u64)(x - min) / step;
	/* clang knows slot <= n + 1 and would drop the test; the verifier (which does not
	 * follow a division's bounds) needs it. */
	asm volatile("" : "+r"(slot));
	if (slot <= n + 1)
		__sync_fetch_and_add(&slots[slot], 1);
	__sync_fetch_and_add(sum, x);
}

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

/* A duration histogram counts whole microseconds, so its bounds are round ([16us, 32us));
 * its sum stays in nanoseconds. */
static __always_inline void fslat_hist_add_us(struct fslat_hist *h, __s64 ns)
{
	__s64 us = ns < 0 ? ns : (__s64)((__u64)ns / 1000);
	__u32 slot = us < 0 ? 0 : 1 + fslat_log2_bucket((__u64)us);
	if (slot < FSLAT_HIST_SLOTS)
		__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->sum, ns);
}

#ifdef FSLAT_WANT_PATH
/*
 * path(file): the file's path from the root of the mount namespace, walking dentries up
 * and crossing mount points, at most FSLAT_PATH_DEPTH components. A path with more
 * components starts with "..."; one longer than FSLAT_PATH_CAP - 1 bytes ends with "...".
 * The flavoured types (___fslat) are matched to the kernel's by CO-RE.
 */
#define FSLAT_PATH_CAP 128
#define FSLAT_PATH_DEPTH 16

struct qstr___fslat {
	const unsigned char *name;
} __attribute__((preserve_access_index));
struct dentry___fslat {
	struct dentry___fslat *d_parent;
	struct qstr___fslat d_name;
} __attribute__((preserve_access_index));
struct vfsmount___fslat {
	struct dentry___fslat *mnt_root;
} __attribute__((preserve_access_index));
struct mount___fslat {
	struct mount___fslat *mnt_parent;
	struct dentry___fslat *mnt_mountpoint;
	struct vfsmount___fslat mnt;
} __attribute__((preserve_access_index));
struct path___fslat {
	struct vfsmount___fslat *mnt;
	struct dentry___fslat *dentry;
} __attribute__((preserve_access_index));
struct file___fslat {
	struct path___fslat f_path;
} __attribute__((preserve_access_index));

/*
 * State of one path() between bpf_loop steps (bpf_loop keeps the verifier's work linear in
 * the loop body instead of exponential in the iterations). It lives in the scratch map,
 * not on the stack: kernels before 6.7 verify a bpf_loop callback once, with the caller's
 * stack as it was at the call (n = 0, more = false), and then remove the branches that
 * state says are never taken (`n >= FSLAT_PATH_DEPTH`, `if (w->more)`), so on 6.1 a deep
 * path came out as a wrong component with no leaf and no "...". Map memory is never
 * assumed to hold a known value, so every kernel runs the code as written.
 */
struct fslat_path_walk {
	struct dentry___fslat *d;
	struct mount___fslat *m;
	/* Where the walk stops besides the namespace's root (NULL: nowhere else). */
	struct dentry___fslat *root_d;
	struct vfsmount___fslat *root_m;
	__u32 n;
	__u32 off;
	bool more;
};

/* Twice the cap, so a read of FSLAT_PATH_CAP bytes at any offset below the cap fits. */
struct fslat_path_scratch {
	const void *names[FSLAT_PATH_DEPTH];
	char buf[FSLAT_PATH_CAP * 2];
	struct fslat_path_walk w;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fslat_path_scratch);
} FSLAT_PATH_SCRATCH_MAP SEC(".maps");

static struct fslat_path_scratch *fslat_path_buf(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&FSLAT_PATH_SCRATCH_MAP, &zero);
}

/* One step up: to the parent dentry, or across a mount point; 1 ends the walk. */
static long fslat_path_up(__u64 i, void *ctx)
{
	struct fslat_path_scratch *s = fslat_path_buf();
	if (!s)
		return 1;
	struct fslat_path_walk *w = &s->w;
	/* Locals, so CO-RE relocations name the kernel's types, not the walk's. */
	struct dentry___fslat *d = w->d;
	struct mount___fslat *m = w->m;
	if (d == w->root_d && (void *)m + bpf_core_field_offset(struct mount___fslat, mnt) == w->root_m)
		return 1;
	if (d == BPF_CORE_READ(m, mnt.mnt_root)) {
		struct mount___fslat *parent = BPF_CORE_READ(m, mnt_parent);
		if (parent == m)
			return 1;
		w->d = BPF_CORE_READ(m, mnt_mountpoint);
		w->m = parent;
		return 0;
	}
	struct dentry___fslat *up = BPF_CORE_READ(d, d_parent);
	if (!up || up == d)
		return 1;
	if (w->n >= FSLAT_PATH_DEPTH) {
		w->more = true;
		return 1;
	}
	s->names[w->n & (FSLAT_PATH_DEPTH - 1)] = BPF_CORE_READ(d, d_name.name);
	w->n++;
	w->d = up;
	return 0;
}

/* Appends "/NAME" for the i-th component from the top. */
static long fslat_path_append(__u64 i, void *ctx)
{
	struct fslat_path_scratch *s = fslat_path_buf();
	if (!s)
		return 1;
	struct fslat_path_walk *w = &s->w;
	if (i >= w->n || w->off >= FSLAT_PATH_CAP - 1)
		return 1;
	__u32 k = w->n - 1 - (__u32)i;
	__u32 off = w->off & (FSLAT_PATH_CAP - 1);
	s->buf[off] = '/';
	off = (off + 1) & (FSLAT_PATH_CAP - 1);
	long r = bpf_probe_read_kernel_str(&s->buf[off], FSLAT_PATH_CAP,
					   s->names[k & (FSLAT_PATH_DEPTH - 1)]);
	w->off += 1 + (r > 1 ? (__u32)r - 1 : 0);
	return 0;
}

struct fs_struct___fslat {
	struct path___fslat root;
} __attribute__((preserve_access_index));
struct task_struct___fslat {
	struct fs_struct___fslat *fs;
} __attribute__((preserve_access_index));

/* The file's path; with `task_root`, from the current task's root directory (what a
 * chroot sees), else from the mount namespace's root (path()). */
static __always_inline void fslat_path_from(char *dst, const void *file, bool task_root)
{
	struct fslat_path_scratch *s = fslat_path_buf();
	if (!s) {
		dst[0] = 0;
		return;
	}
	struct fslat_path_walk *w = &s->w;
	struct file___fslat *f = (struct file___fslat *)file;
	struct vfsmount___fslat *vm = BPF_CORE_READ(f, f_path.mnt);
	w->d = BPF_CORE_READ(f, f_path.dentry);
	w->m = (void *)vm - bpf_core_field_offset(struct mount___fslat, mnt);
	w->root_d = NULL;
	w->root_m = NULL;
	if (task_root) {
		struct task_struct___fslat *task = (void *)bpf_get_current_task();
		w->root_d = BPF_CORE_READ(task, fs, root.dentry);
		w->root_m = BPF_CORE_READ(task, fs, root.mnt);
	}
	w->n = 0;
	w->off = 0;
	w->more = false;
	bpf_loop(FSLAT_PATH_DEPTH + 8, fslat_path_up, NULL, 0);
	if (w->more) {
		s->buf[0] = '.';
		s->buf[1] = '.';
		s->buf[2] = '.';
		w->off = 3;
	}
	bpf_loop(FSLAT_PATH_DEPTH, fslat_path_append, NULL, 0);
	__u32 off = w->off;
	if (w->n == 0 && !w->more) {
		s->buf[0] = '/';
		off = 1;
	}
	if (off >= FSLAT_PATH_CAP - 1) {
		/* Too long: keep the start, mark the cut. */
		s->buf[FSLAT_PATH_CAP - 4] = '.';
		s->buf[FSLAT_PATH_CAP - 3] = '.';
		s->buf[FSLAT_PATH_CAP - 2] = '.';
		off = FSLAT_PATH_CAP - 1;
	}
	s->buf[off & (FSLAT_PATH_CAP - 1)] = 0;
	bpf_probe_read_kernel(dst, FSLAT_PATH_CAP, s->buf);
}

static __always_inline void fslat_path(char *dst, const void *file)
{
	fslat_path_from(dst, file, false);
}
#endif /* FSLAT_WANT_PATH */

#if defined(FSLAT_WANT_KSTACK) || defined(FSLAT_WANT_USTACK)
/*
 * kstack and ustack: bpf_get_stackid stores the stack in a stack map (identical stacks
 * share one id, so a stack key costs one id) and the program keeps the id. User space
 * reads and symbolizes the stack by id. A negative id is a stack that was not captured
 * (no user stack: a kernel thread) or not stored (map full, hash bucket taken by another
 * stack): counted in stack_lost, and printed as lost.
 */
#define FSLAT_STACK_DEPTH 127 /* the kernel's default perf_event_max_stack */
#define FSLAT_STACK_ENTRIES 4096
#define FSLAT_F_USER_STACK (1ULL << 8) /* BPF_F_USER_STACK */

struct fslat_stack_map {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, FSLAT_STACK_ENTRIES);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, FSLAT_STACK_DEPTH * sizeof(__u64));
};

/* `lost` (may be NULL): the session's stack_lost counter. */
static __always_inline __s64 fslat_stackid(void *ctx, void *map, __u64 flags, __u64 *lost)
{
	__s64 id = bpf_get_stackid(ctx, map, flags);
	if (id < 0 && lost)
		__sync_fetch_and_add(lost, 1);
	return id;
}
#endif

#ifdef FSLAT_WANT_KSTACK
struct fslat_stack_map FSLAT_KSTACKS_MAP SEC(".maps");
#endif

#ifdef FSLAT_WANT_USTACK
struct fslat_stack_map FSLAT_USTACKS_MAP SEC(".maps");
/* Where a user stack goes when its bucket in the first map holds another stack: each
 * short-lived process brings new addresses (ASLR), so buckets fill fast. */
struct fslat_stack_map FSLAT_USTACKS_MAP_2 SEC(".maps");

/* Processes already announced to user space (see fslat_ustackid). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} FSLAT_USTACK_TGIDS_MAP SEC(".maps");

/* A ring buffer record that is not an event: "tgid has user stacks, read its mappings
 * now", so its stacks can be symbolized after it has exited. FSLAT_ANNOUNCE_ID comes
 * from the program (src/check/resources.rs), which also checks the layout. */
struct fslat_announce {
	__u32 fslat_id;
	__u32 tgid;
};

#ifdef FSLAT_USTACK_FILES
/*
 * With bpf_find_vma (5.17), each user frame is resolved when its stack is first captured
 * (per tgid and stack id): the file mapped there and the offset in that file. So user space
 * needs nothing of the process, which may be gone (or have exec'd) by the time it prints.
 * Each file gets a number the first time it is seen, with its path (the dentry walk of
 * path()); the frames name files by number. FSLAT_UFRAMES_MAP: packed ustack key -> frames;
 * FSLAT_UFILES_MAP: file identity -> number and path.
 */
struct fslat_ufile_id {
	__u64 ino;
	__u32 dev;
	__u32 gen;
};

struct fslat_ufile {
	__u32 number;
	char path[FSLAT_PATH_CAP];
};

/* `file` 0: no file (anonymous memory, the vdso, or an offset past 4 GiB). */
struct fslat_uframe {
	__u32 file;
	__u32 offset;
};

struct fslat_uframes {
	struct fslat_uframe f[FSLAT_STACK_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FSLAT_UFRAMES_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct fslat_uframes);
} FSLAT_UFRAMES_MAP SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FSLAT_UFILES_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fslat_ufile_id);
	__type(value, struct fslat_ufile);
} FSLAT_UFILES_MAP SEC(".maps");

struct super_block___fslat {
	__u32 s_dev;
} __attribute__((preserve_access_index));
struct inode___fslat {
	unsigned long i_ino;
	__u32 i_generation;
	struct super_block___fslat *i_sb;
} __attribute__((preserve_access_index));
struct file___fslatu {
	struct inode___fslat *f_inode;
} __attribute__((preserve_access_index));
struct vm_area_struct___fslat {
	unsigned long vm_start;
	unsigned long vm_pgoff;
	struct file___fslatu *vm_file;
} __attribute__((preserve_access_index));

/* The work of one resolution, per CPU: too big for the BPF stack, and (as path()'s) state
 * between bpf_loop and bpf_find_vma callbacks lives in map memory. */
struct fslat_ustack_scratch {
	__u64 ips[FSLAT_STACK_DEPTH];
	struct fslat_uframes frames;
	struct fslat_ufile file;
	struct fslat_ufile_id id;
	void *vm_file;
	__u64 offset;
	__u32 n;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fslat_ustack_scratch);
} FSLAT_USTACK_SCRATCH_MAP SEC(".maps");

/* The next file number (0 is "no file"). */
static __u32 fslat_ufile_next;

static struct fslat_ustack_scratch *fslat_ustack_buf(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&FSLAT_USTACK_SCRATCH_MAP, &zero);
}

/* bpf_find_vma's callback: the mapping holding the frame's address. */
static long fslat_uframe_vma(void *task, struct vm_area_struct___fslat *vma, void *ctx)
{
	struct fslat_ustack_scratch *s = fslat_ustack_buf();
	if (!s)
		return 0;
	struct file___fslatu *file = BPF_CORE_READ(vma, vm_file);
	if (!file)
		return 0;
	struct inode___fslat *inode = BPF_CORE_READ(file, f_inode);
	s->id.ino = BPF_CORE_READ(inode, i_ino);
	s->id.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	s->id.gen = BPF_CORE_READ(inode, i_generation);
	s->offset = s->offset - BPF_CORE_READ(vma, vm_start) +
		    ((__u64)BPF_CORE_READ(vma, vm_pgoff) << 12 /* PAGE_SHIFT */);
	s->vm_file = file;
	return 0;
}

/* The number of the file s->id names, given one (with its path) the first time. */
static __always_inline __u32 fslat_ufile_number(struct fslat_ustack_scratch *s)
{
	struct fslat_ufile_id id = s->id;
	struct fslat_ufile *known = bpf_map_lookup_elem(&FSLAT_UFILES_MAP, &id);
	if (known)
		return known->number;
	s->file.number = __sync_fetch_and_add(&fslat_ufile_next, 1) + 1;
	fslat_path_from(s->file.path, s->vm_file, true);
	if (!bpf_map_update_elem(&FSLAT_UFILES_MAP, &id, &s->file, BPF_NOEXIST))
		return s->file.number;
	/* Another CPU numbered it first (or the map is full: no file). */
	known = bpf_map_lookup_elem(&FSLAT_UFILES_MAP, &id);
	return known ? known->number : 0;
}

static long fslat_uframe_step(__u64 i, void *ctx)
{
	struct fslat_ustack_scratch *s = fslat_ustack_buf();
	if (!s || i >= FSLAT_STACK_DEPTH)
		return 1;
	struct fslat_uframe *f = &s->frames.f[i];
	f->file = 0;
	f->offset = 0;
	if (i >= s->n)
		return 0;
	s->vm_file = NULL;
	s->offset = s->ips[i];
	if (bpf_find_vma(bpf_get_current_task_btf(), s->ips[i], fslat_uframe_vma, NULL, 0) ||
	    !s->vm_file || s->offset > 0xffffffffULL)
		return 0;
	__u32 offset = (__u32)s->offset;
	__u32 file = fslat_ufile_number(s);
	/* s again: the verifier does not keep a map value pointer's bounds across a call. */
	s = fslat_ustack_buf();
	if (!s || i >= FSLAT_STACK_DEPTH)
		return 1;
	s->frames.f[i].file = file;
	s->frames.f[i].offset = offset;
	return 0;
}

/* Resolves the user stack being captured, once per key. */
static __always_inline void fslat_ustack_files(void *ctx, __u64 key)
{
	if (bpf_map_lookup_elem(&FSLAT_UFRAMES_MAP, &key))
		return;
	struct fslat_ustack_scratch *s = fslat_ustack_buf();
	if (!s)
		return;
	long len = bpf_get_stack(ctx, s->ips, sizeof(s->ips), FSLAT_F_USER_STACK);
	if (len <= 0)
		return;
	s->n = (__u32)len / sizeof(__u64);
	bpf_loop(FSLAT_STACK_DEPTH, fslat_uframe_step, NULL, 0);
	s = fslat_ustack_buf();
	if (s)
		bpf_map_update_elem(&FSLAT_UFRAMES_MAP, &key, &s->frames, BPF_NOEXIST);
}
#endif /* FSLAT_USTACK_FILES */

/*
 * A user stack id is only meaningful with the process whose mappings its addresses are
 * in: the value is the tgid in the high 32 bits and the (signed) stack id in the low 32,
 * so the same addresses in two processes are two keys.
 */
static __always_inline __u64 fslat_ustackid(void *ctx, void *ring, __u64 *lost)
{
	__u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	__s64 id = bpf_get_stackid(ctx, &FSLAT_USTACKS_MAP, FSLAT_F_USER_STACK);
	if (id == -17 /* EEXIST: the bucket holds another stack */) {
		id = bpf_get_stackid(ctx, &FSLAT_USTACKS_MAP_2, FSLAT_F_USER_STACK);
		if (id >= 0)
			id |= FSLAT_USTACK_SECOND;
	}
	if (id < 0 && lost)
		__sync_fetch_and_add(lost, 1);
	__u64 packed = ((__u64)tgid << 32) | (__u32)id;
	__u8 one = 1;
#ifdef FSLAT_USTACK_FILES
	if (id >= 0)
		fslat_ustack_files(ctx, packed);
#endif
	if (id < 0 || bpf_map_update_elem(&FSLAT_USTACK_TGIDS_MAP, &tgid, &one, BPF_NOEXIST))
		return packed;
	struct fslat_announce *a = bpf_ringbuf_reserve(ring, sizeof(*a), 0);
	if (!a) {
		/* Announce it with the next stack instead. */
		bpf_map_delete_elem(&FSLAT_USTACK_TGIDS_MAP, &tgid);
		return packed;
	}
	a->fslat_id = FSLAT_ANNOUNCE_ID;
	a->tgid = tgid;
	bpf_ringbuf_submit(a, 2 /* BPF_RB_FORCE_WAKEUP: read the mappings now */);
	return packed;
}
#endif

#endif /* FSLAT_BPF_H */
