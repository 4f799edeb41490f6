/* Known USDT probes (sys/sdt.h): `fslat:args` with an argument of every size and sign,
 * `fslat:guarded` behind a semaphore (it fires only while traced: the program prints how
 * many times its guarded path ran), `fslat:name` with a string, and `fslat:enter` /
 * `fslat:leave` around a recursive operation (depth 3: the spans nest).
 * Usage: sdt N (each probe N times; `fslat:enter` 3N times).
 * With UFUNC_GO=FILE in its environment it first waits (polling) until FILE exists: fslat
 * can attach to it by pid, with the program mapped (libbpf needs its mapping to attach a
 * PIE's USDT probe on a kernel without BPF cookies). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

/* sdt_guarded.c: the one probe with a semaphore (sys/sdt.h gives every probe of a file
 * one, or none). Returns whether the probe is enabled (and then fired it). */
int fslat_guarded(int i);

static volatile int8_t s8 = -5;
static volatile uint8_t u8 = 250;
static volatile int16_t s16 = -1234;
static volatile uint16_t u16 = 60000;
static volatile int32_t s32 = -100000;
static volatile uint32_t u32 = 4000000000u;
static volatile int64_t s64 = -5000000000ll;
static volatile uint64_t u64 = 18000000000000000000ull;

/* The arguments arrive in registers and on the stack, so the notes spell both forms
 * (`-1@%dil`, `8@16(%rsp)`). */
static __attribute__((noinline)) void args(int8_t a, uint8_t b, int16_t c, uint16_t d,
					   int32_t e, uint32_t f, int64_t g, uint64_t h)
{
	DTRACE_PROBE8(fslat, args, a, b, c, d, e, f, g, h);
}

static void pause_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

/* depth 3: enter(3) enter(2) enter(1) leave(1) leave(2) leave(3); each level sleeps 2 ms
 * before its inner call, so the outer spans are the longer ones. */
static __attribute__((noinline)) void recurse(int depth)
{
	DTRACE_PROBE1(fslat, enter, depth);
	pause_ms(2);
	if (depth > 1)
		recurse(depth - 1);
	DTRACE_PROBE1(fslat, leave, depth);
}

/* A function the kernel refuses to uprobe: its first instruction, hlt, is one uprobes
 * cannot step over (EINVAL at attach while a process maps the file). Never called; the
 * usdt_semaphore case attaches to it after fslat:guarded, to fail an attach part way. */
__asm__(".globl fslat_unprobeable\n"
	".type fslat_unprobeable, @function\n"
	"fslat_unprobeable:\n"
	"\thlt\n"
	"\tret\n"
	".size fslat_unprobeable, .-fslat_unprobeable\n");

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	int guarded = 0;
	const char *go = getenv("UFUNC_GO");
	while (go && access(go, F_OK))
		poll(NULL, 0, 10);
	const char *name = "fslat-sdt";
	/* A probe's read of user memory cannot fault a page in: touch the string first. */
	if (!*(volatile const char *)name)
		return 1;
	for (int i = 0; i < n; i++) {
		args(s8, u8, s16, u16, s32, u32, s64, u64);
		guarded += fslat_guarded(i);
		DTRACE_PROBE2(fslat, name, name, i);
		recurse(3);
	}
	printf("guarded %d\n", guarded);
	return 0;
}
