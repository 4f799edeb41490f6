/*
 * Short-lived processes with known user stacks, for the ustack cases: each makes its
 * traced read (4321 bytes asked, of its own file) from main -> outer_fn -> inner_fn
 * through an inline system call (no libc wrapper, so no frame is missing) and exits or
 * execs at once.
 *   stackapp short        the read, then exit
 *   stackapp exec         the read, then exec /bin/true (the frames are this program's)
 *   stackapp dlopen LIB   a read of 4322 bytes (main -> first_read), then dlopen LIB and
 *                         main -> plug_outer -> plug_inner (in LIB) makes the 4321 read
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "sysread.h"

__attribute__((noinline)) long inner_fn(int fd)
{
	return sys_read(fd, buf, 4321);
}

__attribute__((noinline)) long outer_fn(int fd)
{
	return inner_fn(fd) + 1;
}

__attribute__((noinline)) long first_read(int fd)
{
	return sys_read(fd, buf, 4322);
}

int main(int argc, char **argv)
{
	int fd = open("/proc/self/exe", O_RDONLY);
	if (fd < 0 || argc < 2)
		return 2;
	if (strcmp(argv[1], "dlopen") == 0) {
		if (argc < 3 || first_read(fd) <= 0)
			return 3;
		void *lib = dlopen(argv[2], RTLD_NOW);
		long (*plug)(int) = lib ? (long (*)(int))dlsym(lib, "plug_outer") : 0;
		return plug && plug(fd) > 0 ? 0 : 4;
	}
	if (outer_fn(fd) <= 0)
		return 5;
	if (strcmp(argv[1], "exec") == 0) {
		execl("/bin/true", "true", (char *)0);
		return 6;
	}
	return 0;
}
