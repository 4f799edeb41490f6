// SPDX-License-Identifier: MIT OR Apache-2.0
// The benchmark's workload: N x pread(fd, buf, 1, 0) on a file in tmpfs, timed with
// CLOCK_MONOTONIC. Under qemu -icount the guest clock counts instructions, so the
// figure is the work one call costs, tracer included. Built static so that it starts
// the same way inside the guest whatever the host's libc is.
//
// usage: workload N [FILE]   (FILE defaults to /tmp/fslat-bench.dat; /tmp is tmpfs)
// prints: ns_per_call=X calls=N total_ns=T
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
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: workload N [FILE]\n");
		return 2;
	}
	char *end;
	long long n = strtoll(argv[1], &end, 10);
	if (*end || n < 0) {
		fprintf(stderr, "workload: bad N '%s'\n", argv[1]);
		return 2;
	}
	const char *path = argc == 3 ? argv[2] : "/tmp/fslat-bench.dat";
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	char buf[4096] = {'x'};
	if (pwrite(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf)) {
		perror("pwrite");
		return 1;
	}
	/* Warm the path (page cache, TLB, the tracer's maps) before timing. */
	for (int i = 0; i < 1000; i++)
		if (pread(fd, buf, 1, 0) != 1) {
			perror("pread");
			return 1;
		}
	long long t0 = now_ns();
	for (long long i = 0; i < n; i++)
		if (pread(fd, buf, 1, 0) != 1) {
			perror("pread");
			return 1;
		}
	long long t1 = now_ns();
	printf("ns_per_call=%.1f calls=%lld total_ns=%lld\n", n ? (double)(t1 - t0) / n : 0.0, n,
	       t1 - t0);
	return 0;
}
