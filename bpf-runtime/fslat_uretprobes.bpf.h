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

/* `words`: the `len` bytes of user stack copied from `sp` on. */
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
#define FSLAT_RI_READ(p, f) ((p)->f)
#else
	struct task_struct___fslatr *t = (void *)bpf_get_current_task();
	struct return_instance___fslat *ri = BPF_CORE_READ(t, utask, return_instances);
	if (!ri)
		return;
	__u64 tramp = BPF_CORE_READ(t, mm, uprobes_state.xol_area, vaddr);
#define FSLAT_RI_READ(p, f) BPF_CORE_READ(p, f)
#endif
	if (!tramp)
		return;
	/* No early exit: every turn ends at the loop's head, so the verifier leaves the loop
	 * in one state, not one per pending instance, each of which it would otherwise walk
	 * through the hash loop after it (over its 1M instructions on 6.12 with a 16 KiB
	 * copy). A turn past the list's end is a test and a jump. */
	for (int i = 0; i < FSLAT_URETPROBE_DEPTH; i++) {
		if (ri) {
			/* The slot of the return address, the stack pointer at the call's entry. */
			__u64 at = FSLAT_RI_READ(ri, stack) - sp;
			if (!(at & 7) && at < len && at < FSLAT_USTACK_COPY &&
			    words[at / 8] == tramp)
				words[at / 8] = FSLAT_RI_READ(ri, orig_ret_vaddr);
			ri = FSLAT_RI_READ(ri, next);
		}
	}
#undef FSLAT_RI_READ
}

#endif /* FSLAT_URETPROBES_BPF_H */
