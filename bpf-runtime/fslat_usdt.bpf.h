/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * USDT points (`usdt:FILE:NAME`), only in programs that have them: libbpf's usdt.bpf.h,
 * whose bpf_usdt_arg() reads an argument where the probe's note says (a register, memory
 * at a register and offset, a constant) and casts it to the note's size and sign. The
 * runtime attaches the program with bpf_program__attach_usdt, which fills the spec maps
 * the header declares (found through bpf_get_attach_cookie, or the address where the
 * kernel lacks cookies) and sets the probe's semaphore while attached. The header reads
 * with bpf_probe_read_kernel and bpf_probe_read_user.
 *
 * Its struct pt_regs is x86-64's as the UAPI names the registers (asm/ptrace.h), the
 * layout of struct fslat_regs.
 */
#ifndef FSLAT_USDT_BPF_H
#define FSLAT_USDT_BPF_H

struct pt_regs {
	unsigned long r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8;
	unsigned long rax, rcx, rdx, rsi, rdi, orig_rax, rip, cs, eflags, rsp, ss;
};

#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#endif
