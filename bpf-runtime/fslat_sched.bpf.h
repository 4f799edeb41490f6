/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where a call's time went (`oncpu`, `runq`, `blocked`, `offcpu`, `switches`): per-thread
 * running totals that the scheduler's hooks keep while the thread has a call in flight.
 * A call reads the totals at entry (saved as entry() values) and again at return, and
 * takes the difference, so nested and recursive calls each get their own figures.
 *
 * The totals tile the clock: at every moment on + runq + blocked == last, and a read at
 * time t while the thread runs gives on + (t - last); so a call's oncpu + offcpu is its
 * return time minus its entry time, which is `latency`, exactly. Every change of state
 * (switch out, wake up, switch in) reads the clock once and moves the time up to it from
 * one total's stretch into that total.
 *
 * `wait_kstack`, `wait_ustack` (FSLAT_SCHED_WAIT_KSTACK, FSLAT_SCHED_WAIT_USTACK): the
 * stacks of a call's longest stretch off the CPU. The switch-out hook takes the thread's
 * stacks (it runs as the thread leaving: its stacks are where it waits); the switch-in
 * hook, which knows the stretch's length, keeps them in the innermost call's slot if the
 * stretch is that call's longest so far; a call's return hands its longest up to its
 * caller's slot. So each nesting level keeps its own, at O(1) per switch. Calls nested
 * deeper than FSLAT_SCHED_LEVELS share the last slot, and read their stacks as lost
 * (counted in the reading session's stack_lost).
 *
 * Included by the generated program, after its maps (the user stack's announcements go
 * to its ring buffer), when it defines FSLAT_WANT_SCHED and FSLAT_SCHED_MAP.
 */
#ifndef FSLAT_SCHED_BPF_H
#define FSLAT_SCHED_BPF_H

enum {
	FSLAT_SCHED_RUNNING = 0,
	FSLAT_SCHED_RUNNABLE = 1, /* preempted, yielded, or woken: on a run queue */
	FSLAT_SCHED_BLOCKED = 2,  /* asleep: waiting for I/O, a lock, a timer... */
};

/* What a read asks for: the figure names of check/builtins.rs. */
enum {
	FSLAT_SCHED_ONCPU = 0,
	FSLAT_SCHED_RUNQ = 1,
	FSLAT_SCHED_BLOCKED_NS = 2,
	FSLAT_SCHED_OFFCPU = 3,
	FSLAT_SCHED_SWITCHES = 4,
};

#if defined(FSLAT_SCHED_WAIT_KSTACK) || defined(FSLAT_SCHED_WAIT_USTACK)
#define FSLAT_SCHED_WAIT
#define FSLAT_SCHED_LEVELS 8

/* One call's longest stretch off the CPU so far, and where the thread left for it. */
struct fslat_sched_wait {
	__u64 longest;
	__s64 kstack;
	__u64 ustack;
};
#endif

struct fslat_sched {
	__u64 on;       /* on-CPU time up to `last` */
	__u64 runq;     /* runnable time */
	__u64 blocked;  /* blocked time */
	__u64 last;     /* when the thread last changed state */
	__u64 switches; /* times it left the CPU */
	__u64 seq;      /* changes with every update by a hook */
	__u32 state;    /* FSLAT_SCHED_* */
	__u32 depth;    /* calls in flight: the hooks do nothing for a thread with none */
#ifdef FSLAT_SCHED_WAIT
	__u64 left;       /* when it last left the CPU */
	__s64 out_kstack; /* and where: its stacks then */
	__u64 out_ustack;
	struct fslat_sched_wait wait[FSLAT_SCHED_LEVELS]; /* by nesting level */
#endif
};

/* The two spellings of a task's state (`__state` from Linux 5.14). The `___fslat`
 * flavours keep these apart from a script's own `struct task_struct`. */
struct task_struct___fslat_sched {
	int pid;
	unsigned int __state;
} __attribute__((preserve_access_index));
struct task_struct___fslat_sched_old {
	long state;
} __attribute__((preserve_access_index));

#define FSLAT_TASK_RUNNING 0
#define FSLAT_TASK_DEAD 0x80

static __always_inline long fslat_task_state(void *task)
{
	struct task_struct___fslat_sched *t = task;
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___fslat_sched_old *)task, state);
}

/* The current thread's totals at one moment, indexed by FSLAT_SCHED_ONCPU.. */
struct fslat_sched_snap {
	__u64 v[5];
};

/* FSLAT_SCHED_STATES_ONLY: what an offcpu item shares with the hooks above (the states
 * a switch leaves a thread in, read the same way); its own hooks are in its template. */
#ifndef FSLAT_SCHED_STATES_ONLY

#ifdef FSLAT_SCHED_WAIT
/* A slot's index, checked by the caller, masked where clang cannot drop it: 5.10's
 * verifier does not keep the caller's bounds through clang's 32-bit arithmetic. */
static __always_inline __u64 fslat_sched_level(__u64 i)
{
	asm volatile("%0 &= 7" : "+r"(i));
	return i;
}
_Static_assert(FSLAT_SCHED_LEVELS == 8, "fslat_sched_level masks with 7");

/* FSLAT_NO_STACK (from the program, check/resources.rs): the stack id of a call that
 * never left the CPU, shown as [empty]. */
static __always_inline __u64 fslat_no_ustack(void)
{
#ifdef FSLAT_SCHED_WAIT_USTACK
	return (bpf_get_current_pid_tgid() & 0xffffffff00000000ULL) | (__u32)FSLAT_NO_STACK;
#else
	return 0;
#endif
}

struct task_struct___fslat_sched_mm {
	void *mm;
} __attribute__((preserve_access_index));

/* Whether the current thread has a user stack (a kernel thread has no memory map). */
static __always_inline bool fslat_sched_user(void)
{
	struct task_struct___fslat_sched_mm *t = (void *)bpf_get_current_task();
	return BPF_CORE_READ(t, mm) != NULL;
}
#endif

#ifndef FSLAT_HASH_CALLS
/* Task storage (Linux 5.11+): found without a key, freed with the task. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct fslat_sched);
} FSLAT_SCHED_MAP SEC(".maps");

static __always_inline struct fslat_sched *fslat_sched_of(void *task)
{
	return bpf_task_storage_get(&FSLAT_SCHED_MAP, task, 0, 0);
}

static __always_inline struct fslat_sched *fslat_sched_current(bool create)
{
	return bpf_task_storage_get(&FSLAT_SCHED_MAP, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/* Nothing to clean up: the entry goes with the task. */
#define FSLAT_SCHED_CLEANUP 0
static __always_inline void fslat_sched_gone(void *task)
{
}
#else
/* Linux 5.10: a hash map keyed by thread id (the idle tasks, thread 0, have no entry: a
 * call on one reads as all on-CPU). A thread's entry stays while it lives, so the map
 * holds the threads that ever had a call in flight; a dead one's goes at its last
 * switch. A thread that finds it full counts sched_lost and its calls read as all
 * on-CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, struct fslat_sched);
} FSLAT_SCHED_MAP SEC(".maps");

static __always_inline struct fslat_sched *fslat_sched_of(void *task)
{
	__u32 tid = BPF_CORE_READ((struct task_struct___fslat_sched *)task, pid);
	return tid ? bpf_map_lookup_elem(&FSLAT_SCHED_MAP, &tid) : NULL;
}

static __always_inline struct fslat_sched *fslat_sched_current(bool create)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	if (!tid)
		return NULL;
	struct fslat_sched *s = bpf_map_lookup_elem(&FSLAT_SCHED_MAP, &tid);
	if (s || !create)
		return s;
	struct fslat_sched zero = {};
	bpf_map_update_elem(&FSLAT_SCHED_MAP, &tid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&FSLAT_SCHED_MAP, &tid);
}

#define FSLAT_SCHED_CLEANUP 1
static __always_inline void fslat_sched_gone(void *task)
{
	__u32 tid = BPF_CORE_READ((struct task_struct___fslat_sched *)task, pid);
	bpf_map_delete_elem(&FSLAT_SCHED_MAP, &tid);
}
#endif

/*
 * The current thread's totals at time t (it runs now), read together. The thread can be
 * preempted while it reads them (a uprobe's program is preemptible), and the hooks then
 * move time between totals: `seq` changes with every update, and a read that saw it
 * change is made again, so the figures are of one moment and still add up. With no entry
 * yet, every total reads as if the thread had been on the CPU since time 0, which is what
 * an entry made at t starts from (fslat_sched_enter): reads before and after it agree.
 */
static __always_inline void fslat_sched_read(struct fslat_sched_snap *out, __u64 t)
{
	struct fslat_sched *s = fslat_sched_current(false);
	out->v[FSLAT_SCHED_ONCPU] = t;
	out->v[FSLAT_SCHED_RUNQ] = 0;
	out->v[FSLAT_SCHED_BLOCKED_NS] = 0;
	out->v[FSLAT_SCHED_OFFCPU] = 0;
	out->v[FSLAT_SCHED_SWITCHES] = 0;
	if (!s)
		return;
#pragma unroll
	for (int i = 0; i < 3; i++) {
		__u64 seq = *(volatile __u64 *)&s->seq;
		asm volatile("" ::: "memory");
		__u64 runq = s->runq, blocked = s->blocked;
		out->v[FSLAT_SCHED_ONCPU] = s->on + (t - s->last);
		out->v[FSLAT_SCHED_RUNQ] = runq;
		out->v[FSLAT_SCHED_BLOCKED_NS] = blocked;
		out->v[FSLAT_SCHED_OFFCPU] = runq + blocked;
		out->v[FSLAT_SCHED_SWITCHES] = s->switches;
		asm volatile("" ::: "memory");
		if (*(volatile __u64 *)&s->seq == seq)
			break;
	}
}

/* At an accepted call's entry (t: its entry time), after its totals were read. Returns 1
 * when the thread has no entry and none could be made (counted sched_lost). */
static __always_inline int fslat_sched_enter(__u64 t)
{
	struct fslat_sched *s = fslat_sched_current(true);
	if (!s)
		return (__u32)bpf_get_current_pid_tgid() != 0;
	if (!s->last) {
		s->on = t;
		s->last = t;
	}
#ifdef FSLAT_SCHED_WAIT
	__u32 d = s->depth;
	if (d < FSLAT_SCHED_LEVELS) {
		struct fslat_sched_wait *w = &s->wait[fslat_sched_level(d)];
		w->longest = 0;
		w->kstack = FSLAT_NO_STACK;
		w->ustack = fslat_no_ustack();
	}
#endif
	s->depth++;
	return 0;
}

/* At the return of a call that entered: the hooks stop when no call is in flight. */
static __always_inline void fslat_sched_leave(void)
{
	struct fslat_sched *s = fslat_sched_current(false);
	if (!s || !s->depth)
		return;
#ifdef FSLAT_SCHED_WAIT
	/* The caller's longest stretch is at least this call's. */
	__u32 d = s->depth;
	if (d >= 2 && d <= FSLAT_SCHED_LEVELS) {
		struct fslat_sched_wait *in = &s->wait[fslat_sched_level(d - 1)];
		struct fslat_sched_wait *out = &s->wait[fslat_sched_level(d - 2)];
		if (in->longest > out->longest)
			*out = *in;
	}
#endif
	s->depth--;
}

#ifdef FSLAT_SCHED_WAIT
/* At the return of a call, after fslat_sched_leave: its slot is the depth now. */
static __always_inline struct fslat_sched_wait *fslat_sched_wait_of_call(__s64 *lost)
{
	struct fslat_sched *s = fslat_sched_current(false);
	*lost = FSLAT_NO_STACK;
	if (!s)
		return NULL;
	__u32 d = s->depth;
	if (d >= FSLAT_SCHED_LEVELS) {
		*lost = -1;
		return NULL;
	}
	return &s->wait[fslat_sched_level(d)];
}

/* A wait stack that reads as lost (not captured in the switch hook, which has no session
 * to count it in, or the call nested deeper than FSLAT_SCHED_LEVELS) is counted in the
 * reading session's stack_lost (`lost`, may be NULL), as kstack's and ustack's are. */
static __always_inline void fslat_sched_count_lost(__s64 id, __u64 *lost)
{
	if (id < 0 && id != FSLAT_EMPTY_STACK && id != FSLAT_NO_STACK && lost)
		__sync_fetch_and_add(lost, 1);
}

/* `wait_kstack`: a kernel stack id; FSLAT_NO_STACK when the call never left the CPU. */
static __always_inline __s64 fslat_sched_wait_kstack(__u64 *lost)
{
	__s64 none;
	struct fslat_sched_wait *w = fslat_sched_wait_of_call(&none);
	__s64 id = w ? w->kstack : none;
	fslat_sched_count_lost(id, lost);
	return id;
}

/* `wait_ustack`: a packed user stack id (fslat_ustackid's). */
static __always_inline __u64 fslat_sched_wait_ustack(__u64 *lost)
{
	__s64 none;
	struct fslat_sched_wait *w = fslat_sched_wait_of_call(&none);
	__u64 packed = w ? w->ustack
			 : (bpf_get_current_pid_tgid() & 0xffffffff00000000ULL) | (__u32)none;
	fslat_sched_count_lost((__s32)(__u32)packed, lost);
#if defined(FSLAT_USTACK_COPY) && defined(FSLAT_USTACK_FILES)
	/* Copied at the switch out, unresolved there: resolved here, in the thread. */
	fslat_ucopy_resolve(packed);
#endif
	return packed;
}
#endif

/*
 * prev leaves the CPU, next comes on it. prev is still runnable when it was preempted
 * or its state is TASK_RUNNING (it yielded, or was woken before it got off the CPU);
 * otherwise it sleeps until sched_wakeup.
 */
SEC("tp_btf/sched_switch")
int fslat_sched_switch(unsigned long long *ctx)
{
	bool preempt = (bool)ctx[0];
	void *prev = (void *)ctx[1];
	void *next = (void *)ctx[2];
	struct fslat_sched *p = fslat_sched_of(prev);
	struct fslat_sched *n = fslat_sched_of(next);
	long state = 0;
	if (p && !p->depth && !FSLAT_SCHED_CLEANUP)
		p = NULL;
	if (p) {
		state = fslat_task_state(prev);
		if (FSLAT_SCHED_CLEANUP && (state & FSLAT_TASK_DEAD)) {
			fslat_sched_gone(prev);
			p = NULL;
		} else if (!p->depth) {
			p = NULL;
		}
	}
	if (n && !n->depth)
		n = NULL;
	/* One clock read serves both (tested apart: the verifier refuses p | n). */
	__u64 now = 0;
	if (p) {
		now = bpf_ktime_get_ns();
		p->seq++;
		p->on += now - p->last;
		p->last = now;
		p->switches++;
		p->state = (preempt || state == FSLAT_TASK_RUNNING) ? FSLAT_SCHED_RUNNABLE
								    : FSLAT_SCHED_BLOCKED;
#ifdef FSLAT_SCHED_WAIT
		/* This hook runs as prev: its stacks are where it leaves. */
		p->left = now;
#ifdef FSLAT_SCHED_WAIT_KSTACK
		p->out_kstack = fslat_kstackid(ctx, NULL);
#endif
#ifdef FSLAT_SCHED_WAIT_USTACK
		/* Not resolved to files here: with interrupts off, bpf_find_vma defers the
		 * mmap lock's release to an irq_work, which the first frame's lookup holds
		 * busy, so the rest would fail. User space names the frames from the
		 * mappings read when the process was announced. */
		p->out_ustack = fslat_sched_user()
				    ? fslat_ustackid_as(ctx, &FSLAT_SCHED_RING, NULL, false)
				    : fslat_no_ustack();
#endif
#endif
	}
	if (n) {
		if (!now)
			now = bpf_ktime_get_ns();
		n->seq++;
		/* Running: its switch out was missed (a hook finds no entry while the task
		 * storage is busy on this CPU); the time since is counted on the CPU, so that
		 * the totals still tile the clock. */
		if (n->state == FSLAT_SCHED_RUNNABLE)
			n->runq += now - n->last;
		else if (n->state == FSLAT_SCHED_BLOCKED)
			n->blocked += now - n->last;
		else
			n->on += now - n->last;
#ifdef FSLAT_SCHED_WAIT
		if (n->state != FSLAT_SCHED_RUNNING) {
			/* The innermost call's longest stretch (a deeper call shares the last). */
			__u32 d = n->depth;
			__u32 i = d > FSLAT_SCHED_LEVELS ? FSLAT_SCHED_LEVELS - 1 : d - 1;
			__u64 stretch = now - n->left;
			struct fslat_sched_wait *w = &n->wait[fslat_sched_level(i)];
			if (i < FSLAT_SCHED_LEVELS && stretch > w->longest) {
				w->longest = stretch;
				w->kstack = n->out_kstack;
				w->ustack = n->out_ustack;
			}
		}
#endif
		n->last = now;
		n->state = FSLAT_SCHED_RUNNING;
	}
	return 0;
}

/* A sleeping thread is put on a run queue: from here it waits for a CPU. */
SEC("tp_btf/sched_wakeup")
int fslat_sched_wakeup(unsigned long long *ctx)
{
	struct fslat_sched *s = fslat_sched_of((void *)ctx[0]);
	if (!s || !s->depth || s->state != FSLAT_SCHED_BLOCKED)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	s->seq++;
	s->blocked += now - s->last;
	s->last = now;
	s->state = FSLAT_SCHED_RUNNABLE;
	return 0;
}

#endif /* FSLAT_SCHED_STATES_ONLY */
#endif /* FSLAT_SCHED_BPF_H */
