/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Pending uretprobes in a copied user stack. A uretprobe (a session's return, fslat's or
 * any other tracer's) replaces the return address of its call in flight with the address
 * of the kernel's return trampoline, the first slot of the process's `[uprobes]` mapping.
 * The kernel keeps the real address in the thread's list of return instances (`struct
 * uprobe_task`'s `return_instances`, innermost first: the stack slot, `stack`, and the
 * address it held, `orig_ret_vaddr`). Since 6.11 the kernel puts the real addresses back
 * into the stacks it walks itself (fixup_uretprobe_trampoline_entries: perf's and
 * bpf_get_stack's); a copy of the stack's bytes has the trampoline where the kernel left
 * it, on every kernel. fslat_ucopy_uretprobes does the kernel's fix on the copy: each slot
 * of a pending instance that lies in the copy and holds the trampoline's address gets the
 * real address back, before the copy is hashed into its key and unwound.
 * Included by fslat_stacks.bpf.h with FSLAT_USTACK_COPY.
 */
#ifndef FSLAT_URETPROBES_BPF_H
#define FSLAT_URETPROBES_BPF_H

struct return_instance___fslat {
	unsigned long stack;
	unsigned long orig_ret_vaddr;
	struct return_instance___fslat *next;
} __attribute__((preserve_access_index));
struct uprobe_task___fslat {
	struct return_instance___fslat *return_instances;
} __attribute__((preserve_access_index));
struct xol_area___fslat {
	unsigned long vaddr;
} __attribute__((preserve_access_index));
struct uprobes_state___fslat {
	struct xol_area___fslat *xol_area;
} __attribute__((preserve_access_index));
struct mm_struct___fslatr {
	struct uprobes_state___fslat uprobes_state;
} __attribute__((preserve_access_index));
struct task_struct___fslatr {
	struct uprobe_task___fslat *utask;
	struct mm_struct___fslatr *mm;
} __attribute__((preserve_access_index));

/* MAX_URETPROBE_DEPTH (kernel/events/uprobes.c): no call deeper gets a uretprobe. */
#define FSLAT_URETPROBE_DEPTH 64

#ifdef FSLAT_USTACK_FILES
/* Where the walk is between bpf_loop turns: map memory (fslat_path.bpf.h says why not
 * the stack). */
struct fslat_uret_walk {
	struct return_instance___fslat *ri;
	__u64 tramp;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fslat_uret_walk);
} fslat_uret_walks SEC(".maps");

/* One pending instance a turn. A callback is verified once, apart from the program: the
 * program leaves bpf_loop in one state, where a loop written inline leaves it in one per
 * instance, and the verifier walked the hash loop after it once for each (over its 1M
 * instructions on 6.12 with a 16 KiB copy). */
static long fslat_uret_step(__u64 i, void *unused)
{
	__u32 zero = 0;
	struct fslat_uret_walk *w = bpf_map_lookup_elem(&fslat_uret_walks, &zero);
	struct fslat_ustack_copy *c = bpf_map_lookup_elem(&FSLAT_UCOPY_SCRATCH_MAP, &zero);
	if (!w || !c || !w->ri)
		return 1;
	struct return_instance___fslat *ri = w->ri;
	/* The slot of the return address: the stack pointer at the call's entry. */
	__u64 at = BPF_CORE_READ(ri, stack) - c->sp;
	__u64 real = BPF_CORE_READ(ri, orig_ret_vaddr);
	w->ri = BPF_CORE_READ(ri, next);
	__u32 len = c->len;
	if ((at & 7) || at >= len)
		return 0;
	/* The bound the verifier needs, on the register the access uses: the barrier keeps
	 * clang (19) from folding it into the compares above. */
	__u64 slot = at / 8;
	asm volatile("" : "+r"(slot));
	if (slot >= FSLAT_USTACK_COPY / 8)
		return 0;
	if (c->words[slot] == w->tramp)
		c->words[slot] = real;
	return 0;
}
#endif

/* `words`: the `len` bytes of user stack copied from `sp` on (the copy in
 * FSLAT_UCOPY_SCRATCH_MAP). */
static __always_inline void fslat_ucopy_uretprobes(__u64 *words, __u64 sp, __u32 len)
{
#ifdef FSLAT_USTACK_FILES
	/* A BTF pointer: plain loads (fslat_ustack_copy says why). */
	struct task_struct___fslatr *t = (void *)bpf_get_current_task_btf();
	struct uprobe_task___fslat *u = t->utask;
	if (!u)
		return;
	struct return_instance___fslat *ri = u->return_instances;
	if (!ri)
		return;
	struct xol_area___fslat *area = t->mm->uprobes_state.xol_area;
	__u64 tramp = area ? area->vaddr : 0;
	__u32 zero = 0;
	struct fslat_uret_walk *w = bpf_map_lookup_elem(&fslat_uret_walks, &zero);
	if (!tramp || !w)
		return;
	w->ri = ri;
	w->tramp = tramp;
	bpf_loop(FSLAT_URETPROBE_DEPTH, fslat_uret_step, NULL, 0);
#else
	struct task_struct___fslatr *t = (void *)bpf_get_current_task();
	struct return_instance___fslat *ri = BPF_CORE_READ(t, utask, return_instances);
	if (!ri)
		return;
	__u64 tramp = BPF_CORE_READ(t, mm, uprobes_state.xol_area, vaddr);
	if (!tramp)
		return;
	/* No bpf_loop (5.10): inline, with no early exit, so the loop ends in one state. */
	for (int i = 0; i < FSLAT_URETPROBE_DEPTH; i++) {
		if (ri) {
			__u64 at = BPF_CORE_READ(ri, stack) - sp;
			__u64 slot = at / 8;
			asm volatile("" : "+r"(slot));
			if (!(at & 7) && at < len && slot < FSLAT_USTACK_COPY / 8 &&
			    words[slot] == tramp)
				words[slot] = BPF_CORE_READ(ri, orig_ret_vaddr);
			ri = BPF_CORE_READ(ri, next);
		}
	}
#endif
}

#endif /* FSLAT_URETPROBES_BPF_H */
