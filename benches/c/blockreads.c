// SPDX-License-Identifier: MIT OR Apache-2.0
// The module benchmark's workload (benches/points.sh): N direct 4 KiB reads of a block
// device (null_blk in the guest), each a request its driver's queue_rq sees once, timed
// with CLOCK_MONOTONIC as workload.c times its preads. Built static.
//
// usage: blockreads N DEV
// prints: ns_per_call=X calls=N total_ns=T
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: blockreads N DEV\n");
		return 2;
	}
	char *end;
	long long n = strtoll(argv[1], &end, 10);
	if (*end || n < 0) {
		fprintf(stderr, "blockreads: bad N '%s'\n", argv[1]);
		return 2;
	}
	int fd = open(argv[2], O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror(argv[2]);
		return 1;
	}
	void *buf;
	if (posix_memalign(&buf, 4096, 4096)) {
		perror("posix_memalign");
		return 1;
	}
	/* Distinct offsets in the first 64 MiB: one request each, nothing merged. The first
	 * 200 warm the path (the tracer's maps, the queue). */
	long long t0 = 0;
	for (long long i = 0; i < 200 + n; i++) {
		if (i == 200)
			t0 = now_ns();
		if (pread(fd, buf, 4096, (i % 16384) * 4096) != 4096) {
			perror("pread");
			return 1;
		}
	}
	long long t1 = now_ns();
	if (n == 0)
		t0 = t1;
	printf("ns_per_call=%.1f calls=%lld total_ns=%lld\n", n ? (double)(t1 - t0) / n : 0.0, n,
	       t1 - t0);
	return 0;
}
