/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading memory into a script's values: strings from kernel or user memory, user-space
 * reads by DWARF offsets, and comparing strings.
 * Included by fslat.bpf.h, after its types and helpers.
 */
#ifndef FSLAT_STR_BPF_H
#define FSLAT_STR_BPF_H

/* 1 around the programs of a sleepable session (the generated C redefines it there). */
#define FSLAT_SLEEPABLE 0

/*
 * A string read's outcome in dst: a read that failed (a user page not in memory, which a
 * BPF program cannot fault in, or a bad address) is the empty string with 0xff in its
 * second byte, which user space shows as <unread>; an empty string read has 0 there (the
 * buffer may hold anything). A NULL pointer is the empty string, as in bpftrace. Returns
 * 1 for a failed read, for the caller to count.
 */
static __always_inline int fslat_str_outcome(char *dst, __u32 size, const void *src, long got)
{
	if (got < 0) {
		dst[0] = 0;
		if (size >= 2)
			dst[1] = src ? (char)0xff : 0;
		return src ? 1 : 0;
	}
	if (got <= 1 && size >= 2)
		dst[1] = 0;
	return 0;
}

/*
 * A user string the plain read could not take, read again in a sleepable program: each
 * page it spans (at most two: n is far below a page) is faulted in by bpf_copy_from_user
 * of one byte, which may sleep, then read as usual. The first page is src's; the second,
 * the one after it, only when the string goes on there. Nothing else of the program runs
 * meanwhile, but other tasks may run on this CPU: the caller holds no per-CPU scratch
 * (codegen runs a session sleepable only then).
 */
static __always_inline long fslat_fault_user_str(char *dst, __u32 n, const void *src)
{
	char byte;
	long got;

	if (bpf_copy_from_user(&byte, 1, src))
		return -1;
	got = bpf_probe_read_user_str(dst, n, src);
	if (got >= 0)
		return got;
	if (bpf_copy_from_user(&byte, 1, (const void *)(((__u64)src | 4095) + 1)))
		return got;
	return bpf_probe_read_user_str(dst, n, src);
}

/*
 * Reads a NUL-terminated string from kernel memory, or from user memory when the
 * pointer is a user address (parameters such as `const char __user *filename`). `sleep`
 * as for fslat_read_strn.
 */
static __always_inline int fslat_read_str(char *dst, __u32 size, const void *src, bool sleep)
{
	long got = bpf_probe_read_kernel_str(dst, size, src);

	if (got < 0)
		got = bpf_probe_read_user_str(dst, size, src);
	if (got < 0 && sleep && src)
		got = fslat_fault_user_str(dst, size, src);
	return fslat_str_outcome(dst, size, src, got);
}

/*
 * str(ptr, len): at most len bytes (and at most size - 1) from src, up to a NUL, then a
 * NUL. A `__user` pointer (BTF type tag) is read as user memory; any other pointer as
 * kernel memory first, then user memory (x86 refuses kernel reads of user addresses).
 * `sleep` (a constant: FSLAT_SLEEPABLE) in a sleepable program: a user string not in
 * memory is faulted in and read (fslat_fault_user_str) rather than failed.
 */
static __always_inline int fslat_read_strn(char *dst, __u32 size, const void *src, __u64 len,
					   bool user, bool sleep)
{
	__u32 n = len < size ? (__u32)len + 1 : size;
	long got = -1;

	if (n > size) /* never: tells the 5.10 verifier the bound */
		n = size;
	if (!user)
		got = bpf_probe_read_kernel_str(dst, n, src);
	if (got < 0)
		got = bpf_probe_read_user_str(dst, n, src);
	if (got < 0 && sleep && src)
		got = fslat_fault_user_str(dst, n, src);
	return fslat_str_outcome(dst, size, src, got);
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

/* A bundle's string argument (`const volatile` in .rodata, written before load): its
 * address hidden from clang, which would otherwise fold reads through a plain pointer to
 * the all-zero initial value instead of what fslat wrote. */
static __always_inline const char *fslat_arg_str(const volatile char *s)
{
	const char *p = (const char *)s;

	barrier_var(p);
	return p;
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

#endif /* FSLAT_STR_BPF_H */
