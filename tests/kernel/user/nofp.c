/*
 * A program built -O2 -fomit-frame-pointer, as Debian builds its packages: main calls
 * a_fn, which calls b_fn, which calls c_fn, which reads once, then it exits. `nofp read`
 * reads with read(2) (4321 bytes asked); `nofp fread` with stdio, whose 4321-byte buffer
 * is filled through fread -> _IO_file_underflow -> read. The functions are noinline and
 * use their callee's result, so every call is a real frame (no inlining, no tail call).
 * It lingers a second after the read (a third argument `now`: it exits at once; a number
 * K: K reads, 50 ms apart).
 * `nofp pull` reads with read(2) inside pull(), which is always inlined into c_fn: built
 * with -g too (nofp-g), for source lines and inlined frames.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char buf[8192];
static char iobuf[4321];

static inline __attribute__((always_inline)) int pull(int fd)
{
	return (int)read(fd, buf, 4321);
}

__attribute__((noinline)) int c_fn(const char *how)
{
	if (strcmp(how, "pull") == 0) {
		int fd = open("/proc/self/exe", O_RDONLY);
		int n = pull(fd);
		close(fd);
		return n;
	}
	if (strcmp(how, "fread") == 0) {
		FILE *f = fopen("/proc/self/exe", "r");
		if (!f)
			return -1;
		setvbuf(f, iobuf, _IOFBF, sizeof(iobuf));
		int n = (int)fread(buf, 1, 10, f);
		fclose(f);
		return n;
	}
	int fd = open("/proc/self/exe", O_RDONLY);
	int n = (int)read(fd, buf, 4321);
	close(fd);
	return n;
}

__attribute__((noinline)) int b_fn(const char *how)
{
	int n = c_fn(how);
	__asm__ volatile("" : "+r"(n));
	return n + 1;
}

__attribute__((noinline)) int a_fn(const char *how)
{
	int n = b_fn(how);
	__asm__ volatile("" : "+r"(n));
	return n + 1;
}

int main(int argc, char **argv)
{
	int n = a_fn(argc > 1 ? argv[1] : "read");
	/* A number K instead of `now`: K reads in all, 50 ms apart, then it exits. */
	int more = argc > 2 ? atoi(argv[2]) : 0;
	for (int i = 1; i < more; i++) {
		usleep(50000);
		n = a_fn(argv[1]);
	}
	if (more == 0 && (argc < 3 || strcmp(argv[2], "now") != 0))
		sleep(1);
	return n > 0 ? 0 : 1;
}
