// SPDX-License-Identifier: MIT OR Apache-2.0
// The USDT benchmark's workload (benches/usdt): a tight loop that fires one USDT probe,
// `fslat:tick` with the loop index as its one argument (sys/sdt.h), timed with
// CLOCK_MONOTONIC (guest instructions under qemu -icount). Built static.
//
// usage: usdtloop N     N probes; prints ns_per_call=X calls=N
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <time.h>

__attribute__((noinline)) static long tick(long i)
{
	DTRACE_PROBE1(fslat, tick, i);
	__asm__ volatile("" ::: "memory");
	return i + 1;
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: usdtloop N\n");
		return 2;
	}
	long n = atol(argv[1]);
	long sum = 0;
	long long t0 = now_ns();
	for (long i = 0; i < n; i++)
		sum += tick(i);
	long long t = now_ns() - t0;
	printf("ns_per_call=%.1f calls=%ld sum=%ld\n", (double)t / n, n, sum);
	return 0;
}
