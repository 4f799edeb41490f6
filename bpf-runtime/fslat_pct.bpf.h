/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * percentiles(): a log-linear histogram per key, plus the exact max. Values below
 * FSLAT_PCT_SUB have a slot each; each power of two [2^k, 2^(k+1)) above is cut into
 * FSLAT_PCT_SUB equal slots, so a slot is at most 1/FSLAT_PCT_SUB of its lower bound
 * wide. src/aggregate/buckets.rs reads the same layout.
 *
 * Two maps per aggregation: the histogram (15 KiB a key, shared, counted with atomic
 * adds) and, per CPU, the count, sum and max (plain stores on this CPU's copy: an exact max
 * without compare-and-swap, which Linux 5.10 lacks). Both are preallocated: an update
 * never waits for memory and is never lost while there is room for its key. The
 * interval max is tagged with the generation user space bumps at each `-i` print.
 */
#ifndef FSLAT_PCT_BPF_H
#define FSLAT_PCT_BPF_H

#define FSLAT_PCT_SHIFT 5
#define FSLAT_PCT_SUB (1 << FSLAT_PCT_SHIFT)
#define FSLAT_PCT_SLOTS (FSLAT_PCT_SUB * (64 - FSLAT_PCT_SHIFT + 1))

/* UAPI values (include/uapi/linux/bpf.h). */
#define FSLAT_MAP_PERCPU_HASH 5

struct fslat_pct {
	__u64 negative;  /* values below 0 (not in any slot) */
	__u64 slots[FSLAT_PCT_SLOTS];
};

struct fslat_pct_max {
	__u64 count;     /* values recorded on this CPU (0: `max` not set yet) */
	__s64 max;       /* over the whole run */
	__u64 gen;       /* generation + 1 of the interval `gen_max` belongs to; 0: none */
	__s64 gen_max;   /* max over that interval */
	__s64 sum;       /* of the values recorded on this CPU (a histogram's `_sum` for
			  * --listen and --otlp) */
};

/* A zero value to insert new keys from: far too big for the 512-byte BPF stack. */
struct fslat_pct fslat_pct_zero;

/* The current interval: written by user space at each `-i` print. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} FSLAT_INTERVAL_MAP SEC(".maps");

static __always_inline __u64 fslat_pct_tag(void)
{
	__u32 zero = 0;
	__u64 *gen = bpf_map_lookup_elem(&FSLAT_INTERVAL_MAP, &zero);
	return gen ? *gen + 1 : 1;
}

static __always_inline __u32 fslat_pct_slot(__u64 v)
{
	if (v < FSLAT_PCT_SUB)
		return v;
	__u32 k = fslat_log2_bucket(v) - 1; /* floor(log2(v)), at least FSLAT_PCT_SHIFT */
	return FSLAT_PCT_SUB * (k - FSLAT_PCT_SHIFT + 1) +
	       (__u32)((v >> (k - FSLAT_PCT_SHIFT)) - FSLAT_PCT_SUB);
}

static __always_inline void fslat_pct_add(struct fslat_pct *p, __s64 x)
{
	if (x < 0) {
		__sync_fetch_and_add(&p->negative, 1);
		return;
	}
	__u32 slot = fslat_pct_slot((__u64)x);
	if (slot < FSLAT_PCT_SLOTS)
		__sync_fetch_and_add(&p->slots[slot], 1);
}

static __always_inline void fslat_pct_max_add(struct fslat_pct_max *m, __s64 x, __u64 tag)
{
	if (m->count == 0 || x > m->max)
		m->max = x;
	if (m->gen != tag || x > m->gen_max) {
		m->gen = tag;
		m->gen_max = x;
	}
	m->count++;
	m->sum += x;
}

#endif /* FSLAT_PCT_BPF_H */
