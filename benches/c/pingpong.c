// SPDX-License-Identifier: MIT OR Apache-2.0
// Context switches: two threads pass one byte back and forth over two pipes, N round
// trips, each thread blocking in read() until the other writes. On the benchmark's 1-CPU
// guest each round trip is two context switches (and two wakeups), and nothing else runs.
// Timed with CLOCK_MONOTONIC (under -icount: instructions).
//
// usage: pingpong N
// prints: ns_per_call=X (per context switch: the time of a round trip / 2) trips=N total_ns=T
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int ping[2], pong[2];
static long long trips;

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *ponger(void *arg)
{
	char c;
	(void)arg;
	for (long long i = 0; i < trips + 1000; i++)
		if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1) {
			perror("ponger");
			exit(1);
		}
	return NULL;
}

static void trip(long long n)
{
	char c = 'x';
	for (long long i = 0; i < n; i++)
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) {
			perror("pinger");
			exit(1);
		}
}

int main(int argc, char **argv)
{
	char *end;
	if (argc != 2 || (trips = strtoll(argv[1], &end, 10)) < 0 || *end) {
		fprintf(stderr, "usage: pingpong N\n");
		return 2;
	}
	pthread_t t;
	if (pipe(ping) || pipe(pong) || pthread_create(&t, NULL, ponger, NULL)) {
		perror("pingpong");
		return 1;
	}
	trip(1000); /* warm up: the tracer's per-thread state, caches */
	long long t0 = now_ns();
	trip(trips);
	long long t1 = now_ns();
	pthread_join(t, NULL);
	printf("ns_per_call=%.1f trips=%lld total_ns=%lld\n",
	       trips ? (double)(t1 - t0) / (2 * trips) : 0.0, trips, t1 - t0);
	return 0;
}
