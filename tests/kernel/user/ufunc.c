/*
 * The user-space program the kernel cases trace (tests/kernel/user/README.md): each
 * command makes calls whose number, arguments, results and durations the cases know.
 *
 *   ufunc nap MS N        N calls of nap(MS): each sleeps MS milliseconds
 *   ufunc args N          N calls of add(i % 10, 7) for i in 0..N
 *   ufunc point N         N calls of norm(&p) with p = {3, 4} (returns 25)
 *   ufunc greet NAME N    N calls of greet(NAME)
 *   ufunc fail N          N calls of fail(i): returns -i (i = 0..N-1)
 *   ufunc depth D R       R calls of depth(D): depth(n) calls depth(n - 1) down to 1
 *   ufunc chain N         N calls of outer, which calls middle, which calls leaf
 *   ufunc lib N           N calls of the shared library's lib_work(i)
 *   ufunc ops N M         N calls of slow_op(i), then M of fast_op(i): two names of 7
 *                         letters, whose table of names is 16 bytes, and two return types
 *   ufunc wait            waits for its standard input to end, then runs `nap 5 3`
 *   ufunc spin MS N       N calls of spin(MS): each runs MS ms of its thread's CPU time,
 *                         and MS ms of the monotonic clock at least
 *   ufunc spin2 MS N      two threads pinned to CPU 0, each making N calls of spin(MS)
 *   ufunc layer SPIN NAP R [D]  R calls of layer(D) (D 2 when not given): each level
 *                         above 1 spins SPIN ms of CPU time, then calls the next;
 *                         layer(1) sleeps NAP ms (after one nap(0))
 *   ufunc req N           N calls of handle(&r), r = { i, 100 + i, "alpha" }: the string
 *                         on a page the program never touches (cold_name)
 *   ufunc mix N           two threads pinned to CPU 0, thread k (1 and 2) making N calls
 *                         of mix(k, i) for i in 0..N, both at once
 *
 * With UFUNC_GO=FILE in its environment it first waits (polling, which calls none of
 * these functions nor nanosleep) until FILE exists: fslat can attach to it by pid.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

struct point {
	long x;
	long y;
};

long lib_work(long n);

NOINLINE long nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts))
		;
	return ms;
}

struct req {
	int id;
	long size;
	const char *name;
};

/*
 * "alpha" alone in a 64 KiB-aligned block of the executable that nothing reads: its page
 * is never faulted into the process (the kernel maps in, around a fault, at most the
 * 64 KiB-aligned block of pages around it), so a BPF program, which cannot fault a page
 * in, cannot read it.
 */
static const char cold_name[65536] __attribute__((section(".rodata.cold"), aligned(65536))) = "alpha";

NOINLINE long handle(struct req *r)
{
	return r->id + r->size;
}

NOINLINE long add(long a, long b)
{
	return a + b;
}

NOINLINE long norm(struct point *p)
{
	return p->x * p->x + p->y * p->y;
}

NOINLINE long greet(const char *name)
{
	return (long)strlen(name);
}

NOINLINE long fail(long i)
{
	return -i;
}

NOINLINE long depth(long n)
{
	if (n <= 1)
		return 1;
	return 1 + depth(n - 1);
}

NOINLINE long leaf(long n)
{
	return n + 1;
}

NOINLINE long middle(long n)
{
	return leaf(n) + 1;
}

NOINLINE long outer(long n)
{
	return middle(n) + 1;
}

static long thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static long monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Runs on the CPU, never sleeping, until the thread has had MS ms of CPU time and MS ms
 * of the monotonic clock have passed. Both: the CPU clock (the scheduler's sched_clock)
 * and the monotonic clock fslat reads can run far apart in a TCG guest (seen on 5.10: 30
 * ms of CPU time in 20.9 ms of monotonic time on the CPU), so only the monotonic bound
 * gives the cases an exact truth about latency. */
NOINLINE long spin(long ms)
{
	long cpu_until = thread_cpu_ns() + ms * 1000000L;
	long until = monotonic_ns() + ms * 1000000L;
	long turns = 0;
	while (thread_cpu_ns() < cpu_until || monotonic_ns() < until)
		turns++;
	return turns > 0;
}

NOINLINE long layer(long n, long spin_ms, long nap_ms)
{
	if (n <= 1)
		return nap(nap_ms);
	spin(spin_ms);
	return layer(n - 1, spin_ms, nap_ms) + 1;
}

struct spinner {
	long ms;
	long n;
	pthread_barrier_t ready;
};

static void *spinner(void *arg)
{
	struct spinner *sp = arg;
	/* Both threads runnable from the first call on. */
	pthread_barrier_wait(&sp->ready);
	for (long i = 0; i < sp->n; i++)
		spin(sp->ms);
	return NULL;
}

/* Two threads on one CPU, both always runnable: each waits about as long as it runs. */
static long spin2(long ms, long n)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	if (sched_setaffinity(0, sizeof one, &one))
		return -1;
	struct spinner sp = { ms, n };
	pthread_barrier_init(&sp.ready, NULL, 2);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, spinner, &sp))
			return -1;
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 2 * n;
}

struct mixer {
	long k;
	long n;
	long sum;
	pthread_barrier_t *ready;
};

/* Called by both threads of `ufunc mix`: k is the calling thread's number. */
NOINLINE long mix(long k, long i)
{
	return k + i;
}

static void *mixer(void *arg)
{
	struct mixer *m = arg;
	pthread_barrier_wait(m->ready);
	for (long i = 0; i < m->n; i++)
		m->sum += mix(m->k, i);
	return NULL;
}

/* Two threads on one CPU calling the same function, each with its own first argument. */
static long mix2(long n)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	if (sched_setaffinity(0, sizeof one, &one))
		return -1;
	pthread_barrier_t ready;
	pthread_barrier_init(&ready, NULL, 2);
	struct mixer m[2] = { { 1, n, 0, &ready }, { 2, n, 0, &ready } };
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, mixer, &m[i]))
			return -1;
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return m[0].sum + m[1].sum;
}

NOINLINE int slow_op(long n)
{
	return (int)n;
}

NOINLINE long fast_op(long n)
{
	return n * 2;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	const char *go = getenv("UFUNC_GO");
	while (go && access(go, F_OK))
		poll(NULL, 0, 10);
	const char *cmd = argv[1];
	long a = argc > 2 ? atol(argv[2]) : 0;
	long b = argc > 3 ? atol(argv[3]) : 0;
	long sum = 0;
	if (!strcmp(cmd, "nap")) {
		for (long i = 0; i < b; i++)
			sum += nap(a);
	} else if (!strcmp(cmd, "args")) {
		for (long i = 0; i < a; i++)
			sum += add(i % 10, 7);
	} else if (!strcmp(cmd, "point")) {
		struct point p = { 3, 4 };
		for (long i = 0; i < a; i++)
			sum += norm(&p);
	} else if (!strcmp(cmd, "greet") && argc > 3) {
		for (long i = 0; i < b; i++)
			sum += greet(argv[2]);
	} else if (!strcmp(cmd, "fail")) {
		for (long i = 0; i < a; i++)
			sum += fail(i);
	} else if (!strcmp(cmd, "depth")) {
		for (long i = 0; i < b; i++)
			sum += depth(a);
	} else if (!strcmp(cmd, "chain")) {
		for (long i = 0; i < a; i++)
			sum += outer(i);
	} else if (!strcmp(cmd, "lib")) {
		for (long i = 0; i < a; i++)
			sum += lib_work(i);
	} else if (!strcmp(cmd, "spin")) {
		for (long i = 0; i < b; i++)
			sum += spin(a);
	} else if (!strcmp(cmd, "spin2")) {
		sum = spin2(a, b);
	} else if (!strcmp(cmd, "mix")) {
		sum = mix2(a);
	} else if (!strcmp(cmd, "layer") && argc > 4) {
		/* The first nanosleep binds its symbol (on the CPU, and faulting pages in):
		 * done before, so that no traced call pays for it. */
		nap(0);
		long depth = argc > 5 ? atol(argv[5]) : 2;
		for (long i = 0, r = atol(argv[4]); i < r; i++)
			sum += layer(depth, a, b);
	} else if (!strcmp(cmd, "ops")) {
		for (long i = 0; i < a; i++)
			sum += slow_op(i);
		for (long i = 0; i < b; i++)
			sum += fast_op(i);
	} else if (!strcmp(cmd, "req")) {
		for (long i = 0; i < a; i++) {
			struct req r = { (int)i, 100 + i, cold_name };
			sum += handle(&r);
		}
	} else if (!strcmp(cmd, "wait")) {
		char buf[64];
		while (read(0, buf, sizeof buf) > 0)
			;
		for (long i = 0; i < 3; i++)
			sum += nap(5);
	} else {
		return 2;
	}
	printf("%ld\n", sum);
	/* Live on a little: fslat symbolizes user stacks while the process runs. */
	poll(NULL, 0, 300);
	return 0;
}
