// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Loads kcount.bpf.o with only the named programs, attaches them, and on SIGINT prints
// what they counted and what the kernel skipped:
//   entries=N returns=N
//   PROG recursion_misses=N [link_missed=N]
// (link_missed: a kprobe_multi link's count of calls its probe skipped, Linux 6.7+).
//
// usage: kloader OBJ PROG...     stderr: "Attached" once attached.
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

static int named(const char *name, int argc, char **argv)
{
	for (int i = 2; i < argc; i++)
		if (!strcmp(name, argv[i]))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: kloader OBJ PROG...\n");
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "kloader: cannot open %s\n", argv[1]);
		return 1;
	}
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj)
		bpf_program__set_autoload(prog, named(bpf_program__name(prog), argc, argv));
	if (bpf_object__load(obj)) {
		fprintf(stderr, "kloader: cannot load %s\n", argv[1]);
		return 1;
	}
	struct bpf_link *links[8];
	int n = 0;
	bpf_object__for_each_program(prog, obj) {
		if (!named(bpf_program__name(prog), argc, argv) || n == 8)
			continue;
		links[n] = bpf_program__attach(prog);
		if (!links[n]) {
			fprintf(stderr, "kloader: cannot attach %s\n", bpf_program__name(prog));
			return 1;
		}
		n++;
	}
	fprintf(stderr, "Attached\n");
	while (!exiting)
		pause();
	n = 0;
	bpf_object__for_each_program(prog, obj) {
		if (!named(bpf_program__name(prog), argc, argv) || n == 8)
			continue;
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		bpf_prog_get_info_by_fd(bpf_program__fd(prog), &info, &len);
		printf("%s recursion_misses=%llu", bpf_program__name(prog),
		       (unsigned long long)info.recursion_misses);
		struct bpf_link_info li = {};
		len = sizeof(li);
		if (!bpf_link_get_info_by_fd(bpf_link__fd(links[n]), &li, &len) &&
		    li.type == BPF_LINK_TYPE_KPROBE_MULTI)
			printf(" link_missed=%llu", (unsigned long long)li.kprobe_multi.missed);
		printf("\n");
		bpf_link__destroy(links[n++]);
	}
	struct bpf_map *bss = bpf_object__find_map_by_name(obj, ".bss");
	__u64 counts[2] = {};
	unsigned int zero = 0;
	if (bss)
		bpf_map__lookup_elem(bss, &zero, sizeof(zero), counts, sizeof(counts), 0);
	printf("entries=%llu returns=%llu\n", (unsigned long long)counts[0],
	       (unsigned long long)counts[1]);
	bpf_object__close(obj);
	return 0;
}
