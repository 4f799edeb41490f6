// SPDX-License-Identifier: MIT OR Apache-2.0
// The user-space benchmark's workload (benches/user): a tight loop of one noinline
// function, timed with CLOCK_MONOTONIC (guest instructions under qemu -icount), or
// sleeps of known lengths for the side-by-side histogram. Built static.
//
// usage: uloop N            N calls of work(i); prints ns_per_call=X calls=N
//        uloop nap MS N     N calls of nap(MS), each sleeping MS milliseconds
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__attribute__((noinline)) long work(long i)
{
	__asm__ volatile("" ::: "memory");
	return i + 1;
}

__attribute__((noinline)) long nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts))
		;
	return ms;
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "nap")) {
		for (long i = 0; i < atol(argv[3]); i++)
			nap(atol(argv[2]));
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: uloop N | uloop nap MS N\n");
		return 2;
	}
	long n = atol(argv[1]);
	long sum = 0;
	long long t0 = now_ns();
	for (long i = 0; i < n; i++)
		sum += work(i);
	long long t = now_ns() - t0;
	printf("ns_per_call=%.1f calls=%ld sum=%ld\n", n ? (double)t / n : 0.0, n, sum);
	return 0;
}
