/* A known CPU profile: one thread busy for SECONDS (the argument, else $SPIN_SECONDS,
 * else 5) of the monotonic clock,
 * three quarters of it in hot() and one quarter in warm(), which run the same loop three
 * times and once as long. The clock is read in main() between rounds of a few
 * milliseconds, so the run ends within a round of SECONDS and almost no time is spent
 * outside the two functions. Built with frame pointers: the kernel's walk of the user
 * stack names main -> hot and main -> warm. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;
static unsigned long round_len = 10000;

__attribute__((noinline)) static void hot(void)
{
	for (unsigned long i = 0; i < 3 * round_len; i++)
		sink += i;
}

__attribute__((noinline)) static void warm(void)
{
	for (unsigned long i = 0; i < round_len; i++)
		sink += i;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *env = getenv("SPIN_SECONDS");
	double seconds = argc > 1 ? atof(argv[1]) : env ? atof(env) : 5;
	double start = now();
	/* A round of about 4 ms: warm()'s share, 1 ms, from one timed call. */
	warm();
	double once = now() - start;
	if (once > 0)
		round_len = (unsigned long)(round_len * 0.001 / once) + 1;
	unsigned long rounds = 0;
	while (now() - start < seconds) {
		hot();
		warm();
		rounds++;
	}
	printf("spin: %lu rounds of %lu and %lu iterations in %.3f s\n", rounds, 3 * round_len,
	       round_len, now() - start);
	return 0;
}
