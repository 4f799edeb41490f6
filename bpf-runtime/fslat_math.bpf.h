/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Arithmetic BPF lacks on some kernels: signed division, the log2 bucket of a value.
 * Included by fslat.bpf.h, after its types and helpers.
 */
#ifndef FSLAT_MATH_BPF_H
#define FSLAT_MATH_BPF_H

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

#endif /* FSLAT_MATH_BPF_H */
