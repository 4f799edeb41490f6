// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Loads usession.bpf.o and attaches its uprobe session program to one function of a
// file through a uprobe_multi link (libbpf 1.7, as libbpf-sys builds it).
//
// usage: uloader OBJ BINARY OFFSET
// stderr: "Attached" once attached; on SIGINT/SIGTERM prints "calls=N" and the
// histogram's non-empty slots on stdout.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: uloader OBJ BINARY OFFSET\n");
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "uloader: cannot load %s\n", argv[1]);
		return 1;
	}
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, "measure");
	unsigned long offset = strtoul(argv[3], NULL, 0);
	LIBBPF_OPTS(bpf_uprobe_multi_opts, opts, .offsets = &offset, .cnt = 1, .session = true);
	struct bpf_link *link = bpf_program__attach_uprobe_multi(prog, -1, argv[2], NULL, &opts);
	if (!link) {
		fprintf(stderr, "uloader: cannot attach to %s at %s\n", argv[2], argv[3]);
		return 1;
	}
	fprintf(stderr, "Attached\n");
	while (!exiting)
		pause();
	bpf_link__destroy(link);
	struct bpf_map *bss = bpf_object__find_map_by_name(obj, ".bss");
	struct bpf_map *hist = bpf_object__find_map_by_name(obj, "hist");
	unsigned long long calls = 0;
	unsigned int zero = 0;
	if (bss)
		bpf_map__lookup_elem(bss, &zero, sizeof(zero), &calls, sizeof(calls), 0);
	printf("calls=%llu\n", calls);
	for (unsigned int slot = 0; slot < 64; slot++) {
		unsigned long long n = 0;
		if (!bpf_map__lookup_elem(hist, &slot, sizeof(slot), &n, sizeof(n), 0) && n)
			printf("slot=%u count=%llu\n", slot, n);
	}
	bpf_object__close(obj);
	return 0;
}
