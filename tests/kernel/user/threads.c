/*
 * `threads [T N]`: T threads (default 4), each making N (default 250) one-byte pread(2)
 * calls of one tmpfs file, all started together; then it exits. Built static (tests/kernel/user/build), so the
 * process makes no other read: `count() by tgid` of vfs_read has exactly T * N calls.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int fd;
static long n;
static pthread_barrier_t start;

static void *reader(void *arg)
{
	char c;
	(void)arg;
	pthread_barrier_wait(&start);
	for (long i = 0; i < n; i++)
		if (pread(fd, &c, 1, 0) != 1)
			abort();
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 1 && argc != 3) {
		fprintf(stderr, "usage: threads [T N]\n");
		return 2;
	}
	int t = argc == 3 ? atoi(argv[1]) : 4;
	n = argc == 3 ? atol(argv[2]) : 250;
	if (t < 1 || t > 64 || n < 0) {
		fprintf(stderr, "threads: T is 1 to 64, N at least 0\n");
		return 2;
	}
	fd = open("/tmp", O_TMPFILE | O_RDWR, 0600);
	if (fd < 0 || pwrite(fd, "x", 1, 0) != 1) {
		perror("threads: a file in /tmp");
		return 1;
	}
	pthread_t ids[64];
	pthread_barrier_init(&start, NULL, (unsigned)t);
	for (int i = 0; i < t; i++)
		if (pthread_create(&ids[i], NULL, reader, NULL) != 0)
			abort();
	for (int i = 0; i < t; i++)
		pthread_join(ids[i], NULL);
	return 0;
}
