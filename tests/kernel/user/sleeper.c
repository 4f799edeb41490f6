// A known off-CPU profile: sleepy() calls nap() 100 times, and nap() sleeps 10 ms with
// the nanosleep system call made in place (no libc frame: the user stack at the switch
// out is nap <- sleepy <- main, by frame pointers). A thread
// named spinner spins beside it on the same CPU (both are bound to CPU 0) until the naps
// are over, so each wakeup finds the CPU busy (`sleeper alone`: no spinner). It prints how
// long the naps took on the monotonic clock: their stretches off the CPU are inside it,
// then the thread's voluntary and involuntary switches during the naps (getrusage).
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

static volatile int done;

__attribute__((noinline)) void nap(void)
{
	struct timespec t = {0, 10 * 1000 * 1000};
	long r;
	asm volatile("syscall"
		     : "=a"(r)
		     : "a"((long)SYS_nanosleep), "D"(&t), "S"(0L)
		     : "rcx", "r11", "memory");
	(void)r;
}

__attribute__((noinline)) void sleepy(void)
{
	for (int i = 0; i < 100; i++)
		nap();
}

static void *spin(void *arg)
{
	(void)arg;
	while (!done)
		;
	return NULL;
}

int main(int argc, char **argv)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	sched_setaffinity(0, sizeof(one), &one);
	int spinner = !(argc > 1 && strcmp(argv[1], "alone") == 0);
	pthread_t t;
	if (spinner) {
		pthread_create(&t, NULL, spin, NULL);
		pthread_setname_np(t, "spinner");
	}
	struct timespec t0, t1;
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sleepy();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	getrusage(RUSAGE_THREAD, &r1);
	done = 1;
	if (spinner)
		pthread_join(t, NULL);
	long us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
	printf("sleeper: 100 naps%s in %ld us\n", spinner ? " beside a spinner" : "", us);
	/* The kernel's own count of the naps' switches: voluntary (the thread blocked: a
	 * nap whose 10 ms ran out before it reached schedule() never left the CPU) and
	 * involuntary (preempted). */
	printf("sleeper: the naps switched %ld times blocked and %ld times preempted\n",
	       r1.ru_nvcsw - r0.ru_nvcsw, r1.ru_nivcsw - r0.ru_nivcsw);
	return 0;
}
