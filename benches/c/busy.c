// SPDX-License-Identifier: MIT OR Apache-2.0
// A busy single thread for the profile benchmark (benches/profile.sh): M million rounds
// of a loop in hot() <- work() <- main(), nothing else, with frame pointers so that a
// kernel walk of the user stack names the three. The same work every run, so the time a
// sampler adds is the run's time less the untraced run's. Timed with CLOCK_MONOTONIC
// (under -icount: instructions).
//
// usage: busy M
// prints: ns_per_call=X (per million rounds) rounds=M total_ns=T
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) static void hot(void)
{
	for (unsigned long i = 0; i < 1000000; i++)
		sink += i;
}

__attribute__((noinline)) static void work(long m)
{
	for (long i = 0; i < m; i++)
		hot();
}

int main(int argc, char **argv)
{
	char *end;
	long m;
	if (argc != 2 || (m = strtol(argv[1], &end, 10)) <= 0 || *end) {
		fprintf(stderr, "usage: busy M\n");
		return 2;
	}
	long long t0 = now_ns();
	work(m);
	long long t1 = now_ns();
	printf("ns_per_call=%.1f rounds=%ld total_ns=%lld\n", (double)(t1 - t0) / m, m, t1 - t0);
	return 0;
}
