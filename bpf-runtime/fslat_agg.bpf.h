/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Aggregation values and their updates: the shared stat layout, hist, lhist (percentiles
 * are in fslat_pct.bpf.h).
 * Included by fslat.bpf.h, after its types and helpers.
 */
#ifndef FSLAT_AGG_BPF_H
#define FSLAT_AGG_BPF_H

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

/* Nanoseconds a microsecond (aggregate::buckets::NS_PER_US; checked in the generated C). */
#define FSLAT_NS_PER_US 1000

/* A duration histogram counts whole microseconds, so its bounds are round ([16us, 32us));
 * its sum stays in nanoseconds. */
static __always_inline void fslat_hist_add_us(struct fslat_hist *h, __s64 ns)
{
	__s64 us = ns < 0 ? ns : (__s64)((__u64)ns / FSLAT_NS_PER_US);
	__u32 slot = us < 0 ? 0 : 1 + fslat_log2_bucket((__u64)us);
	if (slot < FSLAT_HIST_SLOTS)
		__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->sum, ns);
}

#endif /* FSLAT_AGG_BPF_H */
