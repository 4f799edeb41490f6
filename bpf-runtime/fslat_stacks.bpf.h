/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * kstack and ustack: stack ids, and user frames resolved to files at capture.
 * Included by fslat.bpf.h, after its types and helpers.
 */
#ifndef FSLAT_STACKS_BPF_H
#define FSLAT_STACKS_BPF_H

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

/* What bpf_get_stackid says of a stack with no frames (-EFAULT): a profile's sample in
 * user mode has no kernel stack, a kernel thread no user stack. User space shows it
 * empty (src/stacks/mod.rs, EMPTY_STACK); it is not lost. */
#define FSLAT_EMPTY_STACK -14

#endif

#ifdef FSLAT_WANT_KSTACK
struct fslat_stack_map FSLAT_KSTACKS_MAP SEC(".maps");
/* Where a kernel stack goes when its bucket in the first map holds another stack. A
 * bucket is the stack's hash modulo the map's size and is never freed, and the hash
 * follows the kernel's addresses, which change with each boot: without a second chance,
 * the boots whose layout puts two of a script's stacks in one bucket lose the later one
 * at every capture of the run (seen: all 100 naps of offcpu_sleeper, once on 6.12 and
 * once on 6.1). The same bucket of this map is free unless a third stack shares it. */
struct fslat_stack_map FSLAT_KSTACKS_MAP_2 SEC(".maps");

/* A kernel stack's id, FSLAT_STACK_SECOND set for the second map's. On 5.17+ a function
 * of its own (not inlined), so that the verifier does not follow the rest of a program
 * once for each map: inlined, its branch took 6.1's verifier past a million instructions
 * on an `offcpu` program built with clang 19. On kernels without bpf_loop (5.10) inlined:
 * there the call made the verifier of an `offcpu` program run for minutes
 * (example_offcpu), which the inlined form does not. */
#ifdef FSLAT_NO_BPF_LOOP
static __always_inline
#else
static __noinline
#endif
__s64 fslat_kstackid_stored(void *ctx)
{
	__s64 id = bpf_get_stackid(ctx, &FSLAT_KSTACKS_MAP, 0);
	if (id == -17 /* EEXIST: the bucket holds another stack */) {
		id = bpf_get_stackid(ctx, &FSLAT_KSTACKS_MAP_2, 0);
		if (id >= 0)
			id |= FSLAT_STACK_SECOND;
	}
	return id;
}

/* fslat_kstackid_stored; `lost` (may be NULL): the session's stack_lost counter. */
static __always_inline __s64 fslat_kstackid(void *ctx, __u64 *lost)
{
	__s64 id = fslat_kstackid_stored(ctx);
	if (id < 0 && id != FSLAT_EMPTY_STACK && lost)
		__sync_fetch_and_add(lost, 1);
	return id;
}
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
	unsigned long vm_end;
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
	/* A copy's mappings (fslat_ucopy_places): the one found, the ranges of the words that
	 * may be code addresses, and how many lookups were made. */
	__u32 finds;
	__u64 vm_start;
	__u64 vm_end;
	__u64 code_lo;
	__u64 code_span;
	__u64 lib_lo;
	__u64 lib_span;
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

/* Resolves the s->n frames in s->ips under `key`. */
static __always_inline void fslat_ustack_resolve(__u64 key)
{
	bpf_loop(FSLAT_STACK_DEPTH, fslat_uframe_step, NULL, 0);
	struct fslat_ustack_scratch *s = fslat_ustack_buf();
	if (s)
		bpf_map_update_elem(&FSLAT_UFRAMES_MAP, &key, &s->frames, BPF_NOEXIST);
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
	fslat_ustack_resolve(key);
}
#endif /* FSLAT_USTACK_FILES */


#ifdef FSLAT_USTACK_COPY
/*
 * --ustack-bytes N: programs built without frame pointers (Debian's libc, python3...).
 * The user registers and the first N bytes of the user stack are copied at capture, once
 * per key, and user space unwinds them with the files' call-frame information
 * (src/stacks/unwind.rs), as perf --call-graph dwarf does. The key is the tgid and a hash
 * of the instruction pointer and of the copied words that may be code addresses (in the
 * executable's text, or between 4 GiB and the mmap base: libraries, not the stack, not
 * small integers): return addresses are all in it, so two stacks that unwind differently
 * never share a key; locals that point into libraries may split one stack into several
 * keys, which user space shows as one row (the rows' texts are merged).
 */
/* A mapping of the process a copied stack's addresses are in (file 0: no file). */
struct fslat_uvma {
	__u64 start;
	__u64 end;
	__u64 offset; /* in the file, of start */
	__u32 file;
	__u32 pad;
};

#define FSLAT_UCOPY_VMAS 24	/* mappings resolved per copy */
#define FSLAT_UCOPY_FINDS 48	/* bpf_find_vma calls per copy at most */

struct fslat_ustack_copy {
	__u64 ip;
	__u64 sp;
	__u64 bp;
	__u32 len;
	__u32 nvmas;
	struct fslat_uvma vmas[FSLAT_UCOPY_VMAS];
	/* words: the same bytes, read a word at a time (a __u64 load through a cast of
	 * bytes is compiled to eight byte loads, it may be unaligned). */
	union {
		__u8 bytes[FSLAT_USTACK_COPY];
		__u64 words[FSLAT_USTACK_COPY / 8];
	};
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fslat_ustack_copy);
} FSLAT_UCOPY_SCRATCH_MAP SEC(".maps");

#include "fslat_uretprobes.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FSLAT_UCOPIES_ENTRIES);
#ifndef FSLAT_UCOPIES_PREALLOC
	__uint(map_flags, BPF_F_NO_PREALLOC);
#endif
	__type(key, __u64);
	__type(value, struct fslat_ustack_copy);
} FSLAT_UCOPIES_MAP SEC(".maps");

struct pt_regs___fslat {
	unsigned long bp;
	unsigned long ip;
	unsigned long sp;
} __attribute__((preserve_access_index));
struct mm_struct___fslat {
	unsigned long mmap_base;
	unsigned long start_code;
	unsigned long end_code;
	unsigned long start_stack;
} __attribute__((preserve_access_index));
struct task_struct___fslatu {
	void *stack;
	struct mm_struct___fslat *mm;
} __attribute__((preserve_access_index));

/* The user registers: saved at the top of the task's kernel stack on entry. */
static __always_inline struct pt_regs___fslat *fslat_user_regs(void)
{
#ifdef FSLAT_USTACK_FILES
	/* bpf_task_pt_regs (5.15; find_vma is 5.17). */
	return (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
#else
	/* 5.10: THREAD_SIZE (16 KiB) above the stack's base, less struct pt_regs (168). */
	struct task_struct___fslatu *t = (void *)bpf_get_current_task();
	return (void *)((char *)BPF_CORE_READ(t, stack) + 16384 - 168);
#endif
}

#ifdef FSLAT_USTACK_FILES
/*
 * With bpf_find_vma: the mappings of the copy's instruction pointer and of each copied
 * word that may be a return address (the word less one, inside its call), with their
 * files, so user space unwinds and names the stack from them alone, after the process
 * has exited or exec'd (as fslat_ustack_files does for frame-pointer stacks). A word in
 * a mapping already found costs a few compares; at most FSLAT_UCOPY_FINDS lookups and
 * FSLAT_UCOPY_VMAS mappings per copy (user space falls back to the process's mappings).
 */
static long fslat_ucopy_vma(void *task, struct vm_area_struct___fslat *vma, void *ctx)
{
	struct fslat_ustack_scratch *s = fslat_ustack_buf();
	if (!s)
		return 0;
	s->vm_start = BPF_CORE_READ(vma, vm_start);
	s->vm_end = BPF_CORE_READ(vma, vm_end);
	s->offset = (__u64)BPF_CORE_READ(vma, vm_pgoff) << 12 /* PAGE_SHIFT */;
	struct file___fslatu *file = BPF_CORE_READ(vma, vm_file);
	s->vm_file = file;
	if (!file)
		return 0;
	struct inode___fslat *inode = BPF_CORE_READ(file, f_inode);
	s->id.ino = BPF_CORE_READ(inode, i_ino);
	s->id.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	s->id.gen = BPF_CORE_READ(inode, i_generation);
	return 0;
}

static long fslat_ucopy_step(__u64 i, void *ctx)
{
	__u32 zero = 0;
	struct fslat_ustack_copy *c = bpf_map_lookup_elem(&FSLAT_UCOPY_SCRATCH_MAP, &zero);
	struct fslat_ustack_scratch *s = fslat_ustack_buf();
	if (!c || !s)
		return 1;
	__u64 w = c->ip;
	if (i > 0) {
		__u64 k = i - 1;
		if (k * 8 + 8 > c->len || k >= FSLAT_USTACK_COPY / 8)
			return 1;
		w = c->words[k] - 1;
		if (!(w - s->code_lo < s->code_span || w - s->lib_lo < s->lib_span))
			return 0;
	}
	__u32 n = c->nvmas;
	/* In a mapping already found? Without branches, so that one state leaves the loop
	 * (else the verifier walks the lookup below once per way out): w - start < end -
	 * start as the sign of a difference, all below 2^47; unused entries are empty. */
	__u64 seen = 0;
	for (__u32 k = 0; k < FSLAT_UCOPY_VMAS; k++) {
		__u64 x = w - c->vmas[k].start, span = c->vmas[k].end - c->vmas[k].start;
		seen |= ((x - span) & ~x) >> 63;
	}
	if (seen)
		return 0;
	if (n >= FSLAT_UCOPY_VMAS || s->finds >= FSLAT_UCOPY_FINDS)
		return 1;
	s->finds++;
	s->vm_file = NULL;
	s->vm_end = 0;
	if (bpf_find_vma(bpf_get_current_task_btf(), w, fslat_ucopy_vma, NULL, 0))
		return 0;
	s = fslat_ustack_buf();
	if (!s || !s->vm_end)
		return 0;
	__u32 file = s->vm_file ? fslat_ufile_number(s) : 0;
	/* Again: the verifier does not keep a map value pointer's bounds across a call. */
	c = bpf_map_lookup_elem(&FSLAT_UCOPY_SCRATCH_MAP, &zero);
	s = fslat_ustack_buf();
	if (!c || !s)
		return 1;
	n = c->nvmas;
	if (n >= FSLAT_UCOPY_VMAS)
		return 1;
	c->vmas[n].start = s->vm_start;
	c->vmas[n].end = s->vm_end;
	c->vmas[n].offset = s->offset;
	c->vmas[n].file = file;
	c->vmas[n].pad = 0;
	c->nvmas = n + 1;
	return 0;
}

static __always_inline void fslat_ucopy_places(__u64 code_lo, __u64 code_span, __u64 lib_lo,
					       __u64 lib_span)
{
	__u32 zero = 0;
	struct fslat_ustack_copy *c = bpf_map_lookup_elem(&FSLAT_UCOPY_SCRATCH_MAP, &zero);
	struct fslat_ustack_scratch *s = fslat_ustack_buf();
	if (!c || !s)
		return;
	__builtin_memset(c->vmas, 0, sizeof(c->vmas));
	s->finds = 0;
	s->code_lo = code_lo;
	s->code_span = code_span;
	s->lib_lo = lib_lo;
	s->lib_span = lib_span;
	/* A constant count (the step stops at the copy's end): a count that depends on
	 * the length copied would make the verifier walk the hash loop above once per
	 * length. */
	bpf_loop(FSLAT_USTACK_COPY / 8 + 1, fslat_ucopy_step, NULL, 0);
}
#endif

/* `files`: resolve the copy's mappings at capture (not where bpf_find_vma may not run). */
static __always_inline __u64 fslat_ustack_copy(__u32 tgid, __u64 *lost, bool files)
{
	__u32 zero = 0;
	struct fslat_ustack_copy *c = bpf_map_lookup_elem(&FSLAT_UCOPY_SCRATCH_MAP, &zero);
	if (!c)
		return ((__u64)tgid << 32) | 0xffffffffULL;
#ifdef FSLAT_USTACK_FILES
	/* BTF pointers (bpf_get_current_task_btf, bpf_task_pt_regs): plain loads, where
	 * BPF_CORE_READ is one bpf_probe_read_kernel call per field (eight per event). A
	 * task without mm (a kernel thread) reads zeros, as BPF_CORE_READ does. */
	struct task_struct___fslatu *t = (void *)bpf_get_current_task_btf();
	struct pt_regs___fslat *regs = (void *)bpf_task_pt_regs((void *)t);
	struct mm_struct___fslat *mm = t->mm;
	c->ip = regs->ip;
	c->sp = regs->sp;
	c->bp = regs->bp;
	__u64 top = mm->start_stack;
	__u64 code_lo = mm->start_code;
	__u64 code_hi = mm->end_code;
	__u64 lib_hi = mm->mmap_base;
#else
	struct pt_regs___fslat *regs = fslat_user_regs();
	struct task_struct___fslatu *t = (void *)bpf_get_current_task();
	struct mm_struct___fslat *mm = BPF_CORE_READ(t, mm);
	c->ip = BPF_CORE_READ(regs, ip);
	c->sp = BPF_CORE_READ(regs, sp);
	c->bp = BPF_CORE_READ(regs, bp);
	__u64 top = BPF_CORE_READ(mm, start_stack);
	__u64 code_lo = BPF_CORE_READ(mm, start_code);
	__u64 code_hi = BPF_CORE_READ(mm, end_code);
	__u64 lib_hi = BPF_CORE_READ(mm, mmap_base);
#endif
	c->nvmas = 0;
#ifdef FSLAT_USTACK_FILES
	/* Not resolved here: the mappings are looked up later (fslat_ucopy_resolve), in
	 * this memory map only (vmas are read only as far as nvmas says). */
	if (!files)
		c->vmas[0].start = (__u64)mm;
#endif
	__u64 len = FSLAT_USTACK_COPY;
	/* The main thread's stack ends above start_stack: no copy past it. */
	if (c->sp < top && top - c->sp < len)
		len = (top - c->sp) & ~7ULL;
	__u32 got = 0;
	for (int i = 0; i < 4 && len; i++) {
		if (len > FSLAT_USTACK_COPY)
			len = FSLAT_USTACK_COPY;
		if (!bpf_probe_read_user(c->bytes, len, (void *)c->sp)) {
			got = len;
			break;
		}
		/* A thread's stack ends sooner: less. */
		len = (len >> 1) & ~7ULL;
	}
	c->len = got;
	/* The real return addresses of calls with a pending uretprobe, before the hash. Its
	 * length is read back from map memory (volatile: not the register `got` is in), so
	 * the walk's compares narrow a value of its own, not `got`. */
	fslat_ucopy_uretprobes(c->words, c->sp, *(volatile __u32 *)&c->len);
	/* The walk may have looked the map up again: `c` as the verifier knows it still. */
	c = bpf_map_lookup_elem(&FSLAT_UCOPY_SCRATCH_MAP, &zero);
	if (!c)
		return ((__u64)tgid << 32) | 0xffffffffULL;
	__u64 h = 0xcbf29ce484222325ULL ^ c->ip;
	__u64 code_span = code_hi - code_lo;
	__u64 lib_lo = 1ULL << 32;
	__u64 lib_span = lib_hi > lib_lo ? lib_hi - lib_lo : 0;
	for (__u32 i = 0; i < FSLAT_USTACK_COPY / 8; i++) {
		if (i >= got / 8)
			break;
		/* The loop every event pays, a word of stack a turn: two unsigned compares
		 * (22 instructions a turn, against 28 for the branchless form this was; the
		 * branches' states meet again at the next turn, where the verifier prunes). */
		__u64 w = c->words[i];
		if (w - code_lo < code_span || w - lib_lo < lib_span)
			h = (h ^ w) * 0x100000001b3ULL;
	}
	__u64 key = ((__u64)tgid << 32) | (__u32)((h ^ (h >> 32)) & (FSLAT_USTACK_WALKED - 1));
	if (bpf_map_lookup_elem(&FSLAT_UCOPIES_MAP, &key))
		return key;
#ifdef FSLAT_USTACK_FILES
	if (files) {
		fslat_ucopy_places(code_lo, code_span, lib_lo, lib_span);
		c = bpf_map_lookup_elem(&FSLAT_UCOPY_SCRATCH_MAP, &zero);
		if (!c)
			return ((__u64)tgid << 32) | 0xffffffffULL;
	}
#endif
	if (bpf_map_update_elem(&FSLAT_UCOPIES_MAP, &key, c, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&FSLAT_UCOPIES_MAP, &key)) {
		/* The map is full: lost. */
		if (lost)
			__sync_fetch_and_add(lost, 1);
		return ((__u64)tgid << 32) | 0xffffffffULL;
	}
	return key;
}

#ifdef FSLAT_USTACK_FILES
/*
 * A copy taken where bpf_find_vma may not run (a switch out: `wait_ustack`,
 * fslat_sched.bpf.h) has no mappings; user space names it from the process's mappings,
 * read when it was announced, which a process that exits at once (before fslat reads
 * them) does not leave. Called where the stack is read (the call's return, in the same
 * thread): the copy's mappings are looked up now, once per key, if the process still
 * has the memory map the copy was taken in (not one an exec made since).
 */
static __always_inline void fslat_ucopy_resolve(__u64 key)
{
	__u32 zero = 0;
	if ((__s32)(__u32)key < 0)
		return;
	struct fslat_ustack_copy *stored = bpf_map_lookup_elem(&FSLAT_UCOPIES_MAP, &key);
	struct task_struct___fslatu *t = (void *)bpf_get_current_task_btf();
	struct mm_struct___fslat *mm = t->mm;
	if (!stored || stored->nvmas || stored->vmas[0].start != (__u64)mm)
		return;
	struct fslat_ustack_copy *c = bpf_map_lookup_elem(&FSLAT_UCOPY_SCRATCH_MAP, &zero);
	if (!c || bpf_probe_read_kernel(c, sizeof(*c), stored))
		return;
	__u64 code_lo = mm->start_code;
	__u64 code_hi = mm->end_code;
	__u64 lib_hi = mm->mmap_base;
	__u64 lib_lo = 1ULL << 32;
	fslat_ucopy_places(code_lo, code_hi - code_lo, lib_lo, lib_hi > lib_lo ? lib_hi - lib_lo : 0);
	c = bpf_map_lookup_elem(&FSLAT_UCOPY_SCRATCH_MAP, &zero);
	stored = bpf_map_lookup_elem(&FSLAT_UCOPIES_MAP, &key);
	/* The scratch still holds this copy (no switch out on this CPU copied over it). */
	if (c && stored && c->nvmas && c->ip == stored->ip && c->sp == stored->sp)
		bpf_map_update_elem(&FSLAT_UCOPIES_MAP, &key, c, BPF_EXIST);
}
#endif
#endif /* FSLAT_USTACK_COPY */

#ifdef FSLAT_USTACK_WALK
/*
 * --ustack-walk: user stacks unwound in the kernel, from tables user space derives from
 * each mapped file's CFI (src/stacks/walk.rs), in the layout of Parca's unwinder.
 * FSLAT_UROWS_MAP: every prepared file's rows, each file's sorted by address and stored
 * once (processes mapping the file share them); FSLAT_UPROCS_MAP: per process (by the
 * slot FSLAT_USLOTS_MAP gives its tgid), its executable file mappings, sorted, each with
 * its file's rows. The key is the tgid and a hash of the frames' addresses, as a
 * frame-pointer stack's; a process not prepared yet (or that exec'd since) is copied
 * (fslat_ustack_copy) and unwound in user space as without the walk.
 *
 * The walk is one bpf_loop, a turn a frame, its state in a per-CPU map value: a turn
 * records the frame, finds its mapping and its file's row (two binary searches, each
 * whole in the turn) and steps to the caller. The searches take no branch on what they
 * compare (a mask picks the half): a branch a step would make the verifier walk every
 * way through them (it did: a million instructions); only leaving a search early
 * branches, which adds ways one at a time.
 */
struct fslat_urow {
	__u32 pc;	/* in the file's own addresses (the address less the mapping's bias) */
	__u8 kind;	/* FSLAT_UROW_* */
	__u8 bp_saved;	/* the caller's rbp is at CFA + bp_offset (else rbp is kept) */
	__s16 cfa_offset;
	__s16 bp_offset;
	__u16 pad;
};
#define FSLAT_UROW_GAP 0	/* no CFI here: the frame pointer */
#define FSLAT_UROW_SP 1		/* CFA = rsp + cfa_offset */
#define FSLAT_UROW_BP 2		/* CFA = rbp + cfa_offset */
#define FSLAT_UROW_END 3	/* the return address is undefined: the outermost frame */
#define FSLAT_UROW_BAD 4	/* a rule the walk does not follow */

struct fslat_umap {
	__u64 start;
	__u64 end;
	__u64 bias;
	__u32 row_lo;
	__u32 rows;	/* 0: the file has no CFI, frame pointers */
};

struct fslat_uproc {
	__u64 start_stack;	/* the process's, to tell an exec since */
	__u32 n;
	__u32 gen;	/* this table's, never 0 and never another's: the rows cache's key */
	__u64 start_code;	/* with start_stack: an exec since changes one at least */
	__u64 end_code;
	struct fslat_umap m[FSLAT_UWALK_MAPS];
};

struct fslat_uwalk_frames {
	__u64 ips[FSLAT_STACK_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FSLAT_UROWS_ENTRIES);
	__type(key, __u32);
	__type(value, struct fslat_urow);
} FSLAT_UROWS_MAP SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FSLAT_UPROCS_ENTRIES);
	__type(key, __u32);
	__type(value, struct fslat_uproc);
} FSLAT_UPROCS_MAP SEC(".maps");

/* tgid -> slot in FSLAT_UPROCS_MAP (an array: its look-ups are inlined). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FSLAT_UPROCS_ENTRIES);
	__type(key, __u32);
	__type(value, __u32);
} FSLAT_USLOTS_MAP SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* As many as the copies (a profile's are preallocated). */
	__uint(max_entries, FSLAT_UCOPIES_ENTRIES);
#ifndef FSLAT_UCOPIES_PREALLOC
	__uint(map_flags, BPF_F_NO_PREALLOC);
#endif
	__type(key, __u64);
	__type(value, struct fslat_uwalk_frames);
} FSLAT_UWALKS_MAP SEC(".maps");

/* A row the searches found: for the address pc in the table gen. */
struct fslat_urow_cached {
	__u64 pc;
	__u32 gen;
	struct fslat_urow row;
	__u32 pad;
};

#define FSLAT_UWALK_CACHED 256	/* rows cached a CPU (a power of two) */

/* The walk's state between its turns (the frame to record next). `end`: how it ended.
 * `cache`: rows found lately, by address (the same frames come back event after event;
 * a hit spares both searches). */
struct fslat_uwalk {
	__u64 ip;
	__u64 sp;
	__u64 bp;
	__u32 slot;
	__u32 n;
	__u32 end;
	__u32 pad;
	/* The kernel's uretprobe trampoline (0: none pending), and the thread's next pending
	 * return instance (struct return_instance___fslat *, fslat_uretprobes.bpf.h). */
	__u64 tramp;
	__u64 ri;
	struct fslat_urow_cached cache[FSLAT_UWALK_CACHED];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fslat_uwalk);
} FSLAT_UWALK_SCRATCH_MAP SEC(".maps");

/* A mask over an index below FSLAT_STACK_DEPTH; within the scratch value even at 127. */
#define FSLAT_UWALK_INDEX 127
_Static_assert(FSLAT_STACK_DEPTH <= FSLAT_UWALK_INDEX + 1, "walk index mask");
_Static_assert(sizeof(struct fslat_ustack_scratch) >= (FSLAT_UWALK_INDEX + 1) * 8, "walk index mask");

/* n masked, the compiler kept from dropping the mask (it knows n is below the depth
 * where the verifier of 6.1 does not). */
static __always_inline __u32 fslat_uwalk_index(__u32 n)
{
	asm volatile("" : "+r"(n));
	return n & FSLAT_UWALK_INDEX;
}

/* The last word of a stack that ends in an error: FSLAT_UWALK_ERROR | reason. */
#define FSLAT_UWALK_ERROR 0xffffffffffffff00ULL
#define FSLAT_UWALK_COMPLETE 0
#define FSLAT_UWALK_NO_FILE 1		/* an address in no prepared mapping */
#define FSLAT_UWALK_UNSUPPORTED 2	/* a rule the walk does not follow */
#define FSLAT_UWALK_NO_FP 3		/* no CFI and no frame pointer */
#define FSLAT_UWALK_NO_GROWTH 4		/* the stack pointer did not grow */
#define FSLAT_UWALK_UNREADABLE 5	/* the stack could not be read there */
#define FSLAT_UWALK_DEEP 6		/* FSLAT_STACK_DEPTH frames (or turns): truncated */
#define FSLAT_UWALK_URETPROBE 7		/* a trampoline with no pending return for its slot */

/* The return address a pending uretprobe moved from the stack slot `at` (which holds
 * the trampoline's now), or 0. The thread's return instances are innermost first, so
 * the walk going outward meets their slots in their order: instances below `at` (left
 * by a longjmp over their calls) are passed over, a few at most; a chained instance
 * (whose own saved address is the trampoline) is not followed. */
static __always_inline __u64 fslat_uwalk_uretprobe(struct fslat_uwalk *w, __u64 at)
{
	struct return_instance___fslat *ri = (void *)w->ri;
	for (int k = 0; k < 4 && ri && BPF_CORE_READ(ri, stack) < at; k++)
		ri = BPF_CORE_READ(ri, next);
	if (!ri || BPF_CORE_READ(ri, stack) != at)
		return 0;
	__u64 real = BPF_CORE_READ(ri, orig_ret_vaddr);
	w->ri = (__u64)BPF_CORE_READ(ri, next);
	return real == w->tramp ? 0 : real;
}

/* To the caller by the rule `kind` (`row`: its offsets): 0 to go on, 1 at the end. */
static __always_inline long fslat_uwalk_apply(struct fslat_uwalk *w, __u32 kind,
					      struct fslat_urow *row)
{
	__u64 cfa;
	__u8 bp_saved = row->bp_saved;
	__s64 bp_offset = row->bp_offset;
	if (kind == FSLAT_UROW_END) {
		w->end = FSLAT_UWALK_COMPLETE;
		return 1;
	} else if (kind == FSLAT_UROW_SP || kind == FSLAT_UROW_BP) {
		cfa = (kind == FSLAT_UROW_SP ? w->sp : w->bp) + (__s64)row->cfa_offset;
	} else if (kind == FSLAT_UROW_GAP && w->bp > w->sp && w->bp - w->sp < (8 << 20)) {
		/* No CFI: the frame pointer (push rbp; mov rsp, rbp). */
		cfa = w->bp + 16;
		bp_saved = 1;
		bp_offset = -16;
	} else {
		w->end = kind == FSLAT_UROW_GAP ? FSLAT_UWALK_NO_FP : FSLAT_UWALK_UNSUPPORTED;
		return 1;
	}
	if (cfa <= w->sp) {
		w->end = FSLAT_UWALK_NO_GROWTH;
		return 1;
	}
	__u64 ra = 0, bp = w->bp;
	if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa - 8)) ||
	    (bp_saved && bpf_probe_read_user(&bp, sizeof(bp), (void *)(cfa + bp_offset)))) {
		w->end = FSLAT_UWALK_UNREADABLE;
		return 1;
	}
	if (ra && ra == w->tramp) {
		ra = fslat_uwalk_uretprobe(w, cfa - 8);
		if (!ra) {
			w->end = FSLAT_UWALK_URETPROBE;
			return 1;
		}
	}
	if (!ra) {
		w->end = FSLAT_UWALK_COMPLETE;
		return 1;
	}
	w->ip = ra;
	w->sp = cfa;
	w->bp = bp;
	return 0;
}

/* All ones where a <= b, else 0 (both below 2^63), with no branch: the difference's
 * sign, hidden from the compiler, which would turn a compare back into a jump. */
static __always_inline __u64 fslat_uwalk_le(__u64 a, __u64 b)
{
	__u64 d = b - a;
	asm volatile("" : "+r"(d));
	__u64 m = (d >> 63) - 1;
	asm volatile("" : "+r"(m));
	return m;
}

/* In the mappings of p (sorted by start), how many start at or below pc. */
static __always_inline __u64 fslat_uwalk_map_search(struct fslat_uproc *p, __u64 pc)
{
	__u64 lo = 0, hi = p->n;
	for (int k = 0; k < FSLAT_UWALK_MAP_STEPS; k++) {
		__u64 d = hi - lo;
		if (!d || d > FSLAT_UWALK_MAPS)
			break;
		__u64 half = d >> 1;
		__u64 m = fslat_uwalk_le(p->m[(lo + half) & (FSLAT_UWALK_MAPS - 1)].start, pc);
		lo += (half + 1) & m;
		hi -= (d - half) & ~m;
	}
	return lo;
}

/* In the rows [lo, hi) (sorted by pc), the end of those at or below rel; ~0 where a
 * row cannot be read. */
static __always_inline __u64 fslat_uwalk_row_search(__u64 lo, __u64 hi, __u64 rel)
{
	for (int k = 0; k < FSLAT_UROW_STEPS; k++) {
		__u64 d = hi - lo;
		if (!d)
			break;
		__u64 half = d >> 1;
		__u32 mid = lo + half;
		struct fslat_urow *r = bpf_map_lookup_elem(&FSLAT_UROWS_MAP, &mid);
		if (!r)
			return ~0ULL;
		__u64 m = fslat_uwalk_le(r->pc, rel);
		lo += (half + 1) & m;
		hi -= (d - half) & ~m;
	}
	return lo;
}

/* The rule at pc, searched in p's mappings and its file's rows: its kind, and its row
 * in *row (-1 where the walk cannot go on, with w->end set). */
static __always_inline long fslat_uwalk_search(struct fslat_uwalk *w, struct fslat_uproc *p,
					       __u64 pc, struct fslat_urow *row)
{
	__u64 at = fslat_uwalk_map_search(p, pc);
	if (at == 0 || at > FSLAT_UWALK_MAPS) {
		w->end = FSLAT_UWALK_NO_FILE;
		return -1;
	}
	struct fslat_umap *m = &p->m[(at - 1) & (FSLAT_UWALK_MAPS - 1)];
	if (pc >= m->end) {
		w->end = FSLAT_UWALK_NO_FILE;
		return -1;
	}
	__u64 rel = pc - m->bias;
	__u32 first = m->row_lo;
	if (!m->rows || rel > 0xffffffffULL)
		return FSLAT_UROW_GAP;
	__u64 end = fslat_uwalk_row_search(first, (__u64)first + m->rows, rel);
	if (end == ~0ULL) {
		w->end = FSLAT_UWALK_UNSUPPORTED;
		return -1;
	}
	/* Below the file's first row: no CFI there. */
	if (end <= first)
		return FSLAT_UROW_GAP;
	__u32 last = end - 1;
	struct fslat_urow *r = bpf_map_lookup_elem(&FSLAT_UROWS_MAP, &last);
	if (!r) {
		w->end = FSLAT_UWALK_UNSUPPORTED;
		return -1;
	}
	*row = *r;
	return row->kind;
}

/* The rule at w->ip (as fslat_uwalk_search), from the cache where it was found lately.
 * The cache is per CPU; a program that interrupts this one on its CPU may rewrite an
 * entry, so an entry is marked empty while written and read again after its row is
 * copied. */
static __always_inline long fslat_uwalk_rule(struct fslat_uwalk *w, struct fslat_urow *row)
{
	struct fslat_uproc *p = bpf_map_lookup_elem(&FSLAT_UPROCS_MAP, &w->slot);
	if (!p) {
		w->end = FSLAT_UWALK_NO_FILE;
		return -1;
	}
	/* A return address is looked up one byte back, inside its call. */
	__u64 pc = w->n > 1 ? w->ip - 1 : w->ip;
	__u32 gen = p->gen;
	struct fslat_urow_cached *e =
		&w->cache[((pc * 0x9e3779b97f4a7c15ULL) >> 56) & (FSLAT_UWALK_CACHED - 1)];
	if (gen && e->gen == gen && e->pc == pc) {
		*row = e->row;
		asm volatile("" ::: "memory");
		if (e->gen == gen && e->pc == pc)
			return row->kind;
	}
	long kind = fslat_uwalk_search(w, p, pc, row);
	if (kind < 0 || !gen)
		return kind;
	e->gen = 0;
	asm volatile("" ::: "memory");
	e->pc = pc;
	e->row = *row;
	e->row.kind = kind;
	asm volatile("" ::: "memory");
	e->gen = gen;
	return kind;
}

/* One turn: the frame at w->ip recorded, then its caller (0 to go on, 1 at the end). */
static long fslat_uwalk_step(__u64 i, void *ctx)
{
	__u32 zero = 0;
	struct fslat_uwalk *w = bpf_map_lookup_elem(&FSLAT_UWALK_SCRATCH_MAP, &zero);
	struct fslat_ustack_scratch *s = fslat_ustack_buf();
	if (!w || !s)
		return 1;
	__u32 n = w->n;
	if (n >= FSLAT_STACK_DEPTH) {
		w->end = FSLAT_UWALK_DEEP;
		return 1;
	}
	/* Masked as well: 6.1's verifier loses the bound of a copied register. */
	s->ips[fslat_uwalk_index(n)] = w->ip;
	w->n = n + 1;
	struct fslat_urow row = {};
	long kind = fslat_uwalk_rule(w, &row);
	if (kind < 0)
		return 1;
	return fslat_uwalk_apply(w, kind, &row);
}

/* The walked stack's key, or 0 where the process is not prepared (then: the copy). */
static __always_inline __u64 fslat_uwalk(__u32 tgid, __u64 *lost, bool files)
{
	__u32 zero = 0;
	__u32 *slot = bpf_map_lookup_elem(&FSLAT_USLOTS_MAP, &tgid);
	if (!slot)
		return 0;
	__u32 at = *slot;
	struct fslat_uproc *p = bpf_map_lookup_elem(&FSLAT_UPROCS_MAP, &at);
	struct fslat_uwalk *w = bpf_map_lookup_elem(&FSLAT_UWALK_SCRATCH_MAP, &zero);
	if (!p || !w)
		return 0;
	struct task_struct___fslatu *t = (void *)bpf_get_current_task_btf();
	struct pt_regs___fslat *regs = (void *)bpf_task_pt_regs((void *)t);
	struct mm_struct___fslat *mm = t->mm;
	if (!mm || mm->start_stack != p->start_stack || mm->start_code != p->start_code ||
	    mm->end_code != p->end_code)
		return 0;
	w->ip = regs->ip;
	w->sp = regs->sp;
	w->bp = regs->bp;
	w->slot = at;
	w->n = 0;
	w->end = FSLAT_UWALK_DEEP;
	struct task_struct___fslatr *tr = (void *)t;
	w->ri = (__u64)BPF_CORE_READ(tr, utask, return_instances);
	w->tramp = w->ri ? BPF_CORE_READ(tr, mm, uprobes_state.xol_area, vaddr) : 0;
	bpf_loop(FSLAT_UWALK_TURNS, fslat_uwalk_step, NULL, 0);
	w = bpf_map_lookup_elem(&FSLAT_UWALK_SCRATCH_MAP, &zero);
	struct fslat_ustack_scratch *s = fslat_ustack_buf();
	if (!s || !w)
		return 0;
	__u32 n = w->n;
	__u32 end = w->end;
	/* An address in no mapping the table has (a library loaded since it was made): the
	 * copy, which user space unwinds with the mappings it reads again. */
	if (end == FSLAT_UWALK_NO_FILE)
		return 0;
	if (n > FSLAT_STACK_DEPTH)
		n = FSLAT_STACK_DEPTH;
	s->n = n;
	/* The error frame, then the end (a zero); the indexes masked, as 6.1's verifier
	 * loses the bound of n where the compiler copies it. */
	if (end != FSLAT_UWALK_COMPLETE && n < FSLAT_STACK_DEPTH)
		s->ips[fslat_uwalk_index(n++)] = FSLAT_UWALK_ERROR | end;
	if (n < FSLAT_STACK_DEPTH)
		s->ips[fslat_uwalk_index(n)] = 0;
	__u64 h = 0xcbf29ce484222325ULL;
	for (__u32 i = 0; i < FSLAT_STACK_DEPTH; i++) {
		if (i >= n)
			break;
		h = (h ^ s->ips[i]) * 0x100000001b3ULL;
	}
	__u64 key = ((__u64)tgid << 32) | FSLAT_USTACK_WALKED |
		    (__u32)((h ^ (h >> 32)) & (FSLAT_USTACK_WALKED - 1));
	if (bpf_map_lookup_elem(&FSLAT_UWALKS_MAP, &key))
		return key;
	if (bpf_map_update_elem(&FSLAT_UWALKS_MAP, &key, s->ips, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&FSLAT_UWALKS_MAP, &key)) {
		if (lost)
			__sync_fetch_and_add(lost, 1);
		return ((__u64)tgid << 32) | 0xffffffffULL;
	}
	if (files && !bpf_map_lookup_elem(&FSLAT_UFRAMES_MAP, &key))
		fslat_ustack_resolve(key);
	return key;
}
#endif /* FSLAT_USTACK_WALK */

/*
 * A user stack id is only meaningful with the process whose mappings its addresses are
 * in: the value is the tgid in the high 32 bits and the (signed) stack id in the low 32,
 * so the same addresses in two processes are two keys.
 */
static __always_inline __u64 fslat_ustackid_as(void *ctx, void *ring, __u64 *lost, bool files)
{
	__u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
#ifdef FSLAT_USTACK_COPY
	__u64 packed = 0;
#ifdef FSLAT_USTACK_WALK
	packed = fslat_uwalk(tgid, lost, files);
#endif
	if (!packed)
		packed = fslat_ustack_copy(tgid, lost, files);
	__s64 id = (__s32)(__u32)packed;
#else
	__s64 id = bpf_get_stackid(ctx, &FSLAT_USTACKS_MAP, FSLAT_F_USER_STACK);
	if (id == -17 /* EEXIST: the bucket holds another stack */) {
		id = bpf_get_stackid(ctx, &FSLAT_USTACKS_MAP_2, FSLAT_F_USER_STACK);
		if (id >= 0)
			id |= FSLAT_STACK_SECOND;
	}
	if (id < 0 && id != FSLAT_EMPTY_STACK && lost)
		__sync_fetch_and_add(lost, 1);
	__u64 packed = ((__u64)tgid << 32) | (__u32)id;
#ifdef FSLAT_USTACK_FILES
	if (id >= 0 && files)
		fslat_ustack_files(ctx, packed);
#endif
#endif
	/* A lookup first: an update that fails (the tgid is known, the common case) takes
	 * the bucket's lock and a helper call, the lookup is inlined. */
	__u8 one = 1;
	if (id < 0 || bpf_map_lookup_elem(&FSLAT_USTACK_TGIDS_MAP, &tgid) ||
	    bpf_map_update_elem(&FSLAT_USTACK_TGIDS_MAP, &tgid, &one, BPF_NOEXIST))
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

static __always_inline __u64 fslat_ustackid(void *ctx, void *ring, __u64 *lost)
{
	return fslat_ustackid_as(ctx, ring, lost, true);
}
#endif

#endif /* FSLAT_STACKS_BPF_H */
