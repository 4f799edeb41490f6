/* A USDT probe whose semaphore is at an odd address, which the kernel cannot count
 * (a uprobe's ref_ctr_offset must be 2-byte aligned): `fslat:odd`. sys/sdt.h names a
 * probe's semaphore PROVIDER_NAME_semaphore; here that symbol is one byte into an array. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

__attribute__((section(".probes"), used)) volatile unsigned char fslat_odd_bytes[4];
__asm__(".globl fslat_odd_semaphore\n.set fslat_odd_semaphore, fslat_odd_bytes + 1");
extern volatile unsigned short fslat_odd_semaphore;

int main(void)
{
	DTRACE_PROBE(fslat, odd);
	return 0;
}
