/* The library stackapp dlopens: plug_outer -> plug_inner makes the 4321-byte read. */
static inline __attribute__((always_inline)) long sys_read(int fd, void *buf, unsigned long n)
{
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(0), "D"(fd), "S"(buf), "d"(n)
			 : "rcx", "r11", "memory");
	return ret;
}

static char buf[8192];

__attribute__((noinline)) long plug_inner(int fd)
{
	return sys_read(fd, buf, 4321);
}

__attribute__((noinline)) long plug_outer(int fd)
{
	return plug_inner(fd) + 1;
}
