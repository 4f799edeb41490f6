/* The library stackapp dlopens: plug_outer -> plug_inner makes the 4321-byte read. */
#include "sysread.h"

__attribute__((noinline)) long plug_inner(int fd)
{
	return sys_read(fd, buf, 4321);
}

__attribute__((noinline)) long plug_outer(int fd)
{
	return plug_inner(fd) + 1;
}
