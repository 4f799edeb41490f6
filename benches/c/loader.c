// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// The benchmark's C loader and minimal ring-buffer consumer, linked against the
// libbpf.a that libbpf-sys builds (the same libbpf 1.7 fslat uses). Two kinds of object:
//
//  - the hand-written tools (floor.bpf.o, fsession_latency.bpf.o, fentry_latency.bpf.o):
//    what the tutorial's fsession_latency.c does, without a skeleton: write threshold_ns
//    into .rodata, load, attach, poll, then detach, drain, read `stats` from .bss;
//  - an object fslat wrote (`fslat --emit obj -e 'session vfs_read { emit }'`): the
//    "minimal C consumer of the same object": the same steps with fslat's event layout
//    and its per-CPU fslat_counters map, printing fslat's text format with printf.
//
// usage: loader OBJ [-t THRESHOLD_NS] [-b RING_BYTES] [-l]
//   -l: line-buffered stdout (one write per event, as fslat's LineWriter does); a
//       diagnostic for the throughput comparison.
// stderr: "Attached N programs" once attached; stdout: EVENT lines, then SUMMARY.
// Ends on SIGINT/SIGTERM: detach every program, drain the ring buffer, read counters.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "latency.h"

static volatile sig_atomic_t exiting;
static unsigned long long events_printed, bad_records;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

static int quiet(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, args);
}

/* Writes a .rodata variable before load, the way a skeleton would (by its BTF offset). */
static int set_rodata_u64(struct bpf_object *obj, const char *var, unsigned long long value)
{
	struct btf *btf = bpf_object__btf(obj);
	struct bpf_map *map = bpf_object__find_map_by_name(obj, ".rodata");
	size_t size;
	if (!btf || !map)
		return -ENOENT;
	char *data = bpf_map__initial_value(map, &size);
	int sec = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	if (!data || sec < 0)
		return -ENOENT;
	const struct btf_type *t = btf__type_by_id(btf, sec);
	const struct btf_var_secinfo *vs = btf_var_secinfos(t);
	for (int i = 0; i < btf_vlen(t); i++, vs++) {
		const struct btf_type *v = btf__type_by_id(btf, vs->type);
		if (!strcmp(btf__name_by_offset(btf, v->name_off), var) && vs->size == 8 &&
		    vs->offset + 8 <= size) {
			memcpy(data + vs->offset, &value, 8);
			return 0;
		}
	}
	return -ENOENT;
}

/* The hand-written tools' event (latency.h), printed as the tutorial prints it. */
static int tool_event(void *ctx, void *data, size_t size)
{
	const struct latency_event *e = data;
	(void)ctx;
	if (size < sizeof(*e)) {
		bad_records++;
		return 0;
	}
	printf("EVENT comm=%-16s tgid=%u pid=%u requested=%llu result=%lld latency_us=%llu\n",
	       e->comm, e->tgid, e->pid, e->requested, e->result, e->latency_ns / 1000);
	events_printed++;
	return 0;
}

/* fslat's event for `session vfs_read { emit }` (its generated C asserts this layout). */
struct fslat_event {
	unsigned int id;
	char comm[16];
	unsigned int tgid;
	unsigned int pid;
	unsigned long long count;
	long long ret;
	unsigned long long latency_ns;
};
_Static_assert(sizeof(struct fslat_event) == 56, "fslat event size");

static int fslat_event(void *ctx, void *data, size_t size)
{
	const struct fslat_event *e = data;
	(void)ctx;
	if (size != sizeof(*e) || e->id != 0) {
		bad_records++;
		return 0;
	}
	printf("EVENT vfs_read comm=%.16s tgid=%u pid=%u count=%llu ret=%lld latency=%lluus\n",
	       e->comm, e->tgid, e->pid, e->count, e->ret, e->latency_ns / 1000);
	events_printed++;
	return 0;
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	unsigned long long threshold_ns = 0, ring_bytes = 0;
	int have_threshold = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-t") && i + 1 < argc) {
			threshold_ns = strtoull(argv[++i], NULL, 10);
			have_threshold = 1;
		} else if (!strcmp(argv[i], "-b") && i + 1 < argc) {
			ring_bytes = strtoull(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "-l")) {
			setvbuf(stdout, NULL, _IOLBF, 0);
		} else if (!path && argv[i][0] != '-') {
			path = argv[i];
		} else {
			fprintf(stderr, "usage: loader OBJ [-t THRESHOLD_NS] [-b RING_BYTES] [-l]\n");
			return 2;
		}
	}
	if (!path) {
		fprintf(stderr, "usage: loader OBJ [-t THRESHOLD_NS] [-b RING_BYTES] [-l]\n");
		return 2;
	}

	libbpf_set_print(quiet);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	if (!obj) {
		fprintf(stderr, "loader: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	struct bpf_map *counters = bpf_object__find_map_by_name(obj, "fslat_counters");
	int is_fslat = counters != NULL;
	if (have_threshold && set_rodata_u64(obj, "threshold_ns", threshold_ns)) {
		fprintf(stderr, "loader: %s has no threshold_ns\n", path);
		return 1;
	}
	struct bpf_map *ring_map = NULL, *map;
	bpf_object__for_each_map(map, obj)
		if (bpf_map__type(map) == BPF_MAP_TYPE_RINGBUF)
			ring_map = map;
	if (ring_map && ring_bytes && bpf_map__set_max_entries(ring_map, ring_bytes)) {
		fprintf(stderr, "loader: cannot size the ring buffer\n");
		return 1;
	}
	int err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "loader: load failed: %s\n", strerror(-err));
		return 1;
	}
	struct bpf_link *links[64];
	int nlinks = 0;
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj) {
		struct bpf_link *l = bpf_program__attach(prog);
		if (!l || nlinks == 64) {
			fprintf(stderr, "loader: attach %s failed: %s\n", bpf_program__name(prog),
				strerror(errno));
			return 1;
		}
		links[nlinks++] = l;
	}
	struct ring_buffer *ring = NULL;
	if (ring_map) {
		ring = ring_buffer__new(bpf_map__fd(ring_map), is_fslat ? fslat_event : tool_event,
					NULL, NULL);
		if (!ring) {
			fprintf(stderr, "loader: ring buffer: %s\n", strerror(errno));
			return 1;
		}
	}
	fprintf(stderr, "Attached %d program%s\n", nlinks, nlinks == 1 ? "" : "s");

	while (!exiting) {
		int n = ring ? ring_buffer__poll(ring, 100) : 0;
		if (!ring) {
			struct timespec ts = {0, 100000000};
			nanosleep(&ts, NULL);
		}
		if (n < 0 && n != -EINTR) {
			fprintf(stderr, "loader: poll: %s\n", strerror(-n));
			return 1;
		}
	}

	/* Detach, drain, then count: the counters then describe the same calls as the events. */
	for (int i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	if (ring && ring_buffer__consume(ring) < 0)
		fprintf(stderr, "loader: drain failed\n");

	if (is_fslat) {
		/* struct fslat_counters grows with fslat's counters: its size from the map, the
		 * first five fields (calls, matched, errors, dropped, unpaired) at fixed places. */
		int ncpu = libbpf_num_possible_cpus();
		size_t words = bpf_map__value_size(counters) / 8;
		unsigned long long *v = calloc(ncpu, words * 8), sum[5] = {0};
		unsigned int key = 0;
		if (!v || words < 5 ||
		    bpf_map__lookup_elem(counters, &key, sizeof(key), v, words * 8 * ncpu, 0)) {
			fprintf(stderr, "loader: reading counters failed\n");
			return 1;
		}
		for (int c = 0; c < ncpu; c++)
			for (int i = 0; i < 5; i++)
				sum[i] += v[c * words + i];
		printf("SUMMARY vfs_read mode=c-consumer calls=%llu matched=%llu errors=%llu "
		       "dropped=%llu events=%llu unpaired=%llu\n",
		       sum[0], sum[1], sum[2], sum[3], events_printed, sum[4]);
	} else {
		struct bpf_map *bss = bpf_object__find_map_by_name(obj, ".bss");
		size_t size = 0;
		const struct latency_stats *s = bss ? bpf_map__initial_value(bss, &size) : NULL;
		if (s && size >= sizeof(*s))
			printf("SUMMARY calls=%llu slow=%llu errors=%llu dropped=%llu events=%llu\n",
			       s->calls, s->slow, s->errors, s->dropped, events_printed);
		else
			printf("SUMMARY events=%llu\n", events_printed);
	}
	if (bad_records)
		fprintf(stderr, "loader: %llu records of the wrong size\n", bad_records);
	ring_buffer__free(ring);
	bpf_object__close(obj);
	return 0;
}
