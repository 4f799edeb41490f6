// SPDX-License-Identifier: GPL-2.0
// The floor: an fsession program on vfs_read that does nothing. What is left is the
// trampoline's own cost (two program calls per vfs_read, the cookie slot).
#include "mini_vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("fsession/vfs_read")
int floor_vfs_read(void *ctx)
{
	return 0;
}
