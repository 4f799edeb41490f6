/* The shared library ufunc links (tests/kernel/user/README.md). */
#define NOINLINE __attribute__((noinline))

NOINLINE long lib_work(long n)
{
	return n * 2;
}
