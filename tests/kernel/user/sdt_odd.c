/* USDT probes fslat refuses: `fslat:odd`, whose semaphore is at an odd address, which
 * the kernel cannot count (a uprobe's ref_ctr_offset must be 2-byte aligned; sys/sdt.h
 * names a probe's semaphore PROVIDER_NAME_semaphore, here one byte into an array);
 * `twice`, a name two providers have; `fslat:global`, whose argument is a global
 * variable's address relative to %rip, a form libbpf cannot read. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

__attribute__((section(".probes"), used)) volatile unsigned char fslat_odd_bytes[4];
__asm__(".globl fslat_odd_semaphore\n.set fslat_odd_semaphore, fslat_odd_bytes + 1");
extern volatile unsigned short fslat_odd_semaphore;
/* sys/sdt.h gives every probe of a file a semaphore once one has one. */
__attribute__((section(".probes"), used)) volatile unsigned short fslat_twice_semaphore,
	other_twice_semaphore, fslat_global_semaphore;
volatile int fslat_counter;

int main(void)
{
	DTRACE_PROBE(fslat, odd);
	DTRACE_PROBE(fslat, twice);
	DTRACE_PROBE(other, twice);
	DTRACE_PROBE1(fslat, global, fslat_counter);
	return 0;
}
