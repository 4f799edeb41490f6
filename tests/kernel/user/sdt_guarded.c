/* The guarded probe of sdt.c: `fslat:guarded` behind its semaphore, which a tracer sets. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

unsigned short fslat_guarded_semaphore __attribute__((section(".probes"))) = 0;

int fslat_guarded(int i)
{
	if (!fslat_guarded_semaphore)
		return 0;
	DTRACE_PROBE1(fslat, guarded, i);
	return 1;
}
