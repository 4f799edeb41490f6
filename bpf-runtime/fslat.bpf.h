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

/* Linux 6.10: a uprobe session's program runs with preemption off (templates/fsession_multi). */
extern void bpf_preempt_disable(void) __ksym __weak;
extern void bpf_preempt_enable(void) __ksym __weak;

/*
 * One program body for a session's several functions (fentry, fexit, fsession modes):
 * fslat's loader loads a copy per function and writes that function's values over these
 * marks in the copy's instructions (src/runtime/shared.rs). FSLAT_FN_INDEX(): the
 * function's index in the session's tables (the `r = imm` of FN_MARK).
 * FSLAT_CTX_AT(ctx, MARK): the word of the trampoline's argument area that MARK stands
 * for (a parameter's slot or the return value's), a load whose offset is the mark.
 * `asm volatile` keeps each as one instruction that the compiler neither folds nor drops.
 */
#define FSLAT_FN_MARK 0x7f5a1a70 /* check::resources::FN_MARK; checked in the generated C */
#define FSLAT_STR_(x) #x
#define FSLAT_STR(x) FSLAT_STR_(x)
#define FSLAT_FN_INDEX()                                                 \
	({                                                               \
		__u64 __fslat_v;                                         \
		asm volatile("%0 = " FSLAT_STR(FSLAT_FN_MARK)            \
			     : "=r"(__fslat_v));                         \
		__fslat_v;                                               \
	})
#define FSLAT_CTX_AT(ctx, mark)                                          \
	({                                                               \
		__u64 __fslat_v;                                         \
		asm volatile("%0 = *(u64 *)(%1 + " #mark ")"             \
			     : "=r"(__fslat_v)                           \
			     : "r"(ctx));                                \
		__fslat_v;                                               \
	})

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

/* The rest, by concern; each needs what is above. */
#include "fslat_str.bpf.h"
#include "fslat_math.bpf.h"
#include "fslat_agg.bpf.h"
#include "fslat_calls.bpf.h"
#include "fslat_path.bpf.h"
#include "fslat_stacks.bpf.h"
/* fslat_sched.bpf.h comes from the program, after its ring buffer. */

#endif /* FSLAT_BPF_H */
