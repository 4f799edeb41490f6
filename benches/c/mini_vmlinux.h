/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Stand-in for vmlinux.h: just the types the benchmark's hand-written programs use
 * (VM.md: "a 7-line header of just the types it needs"). struct file is only passed
 * around as a pointer, so it needs no members.
 */
#ifndef BENCH_MINI_VMLINUX_H
#define BENCH_MINI_VMLINUX_H
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
typedef unsigned long size_t;
typedef long ssize_t;
typedef long long loff_t;
struct file;
enum { BPF_MAP_TYPE_HASH = 1, BPF_MAP_TYPE_RINGBUF = 27 };
enum { BPF_ANY = 0 };
#endif
