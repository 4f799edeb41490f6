/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * path(file): the dentry walk.
 * Included by fslat.bpf.h, after its types and helpers.
 */
#ifndef FSLAT_PATH_BPF_H
#define FSLAT_PATH_BPF_H

#ifdef FSLAT_WANT_PATH
/*
 * path(file): the file's path from the root of the mount namespace, walking dentries up
 * and crossing mount points, at most FSLAT_PATH_DEPTH components. A path with more
 * components starts with "..."; one longer than FSLAT_PATH_CAP - 1 bytes ends with "...".
 * The flavoured types (___fslat) are matched to the kernel's by CO-RE.
 */
#define FSLAT_PATH_CAP 128
#define FSLAT_PATH_DEPTH 16

struct qstr___fslat {
	const unsigned char *name;
} __attribute__((preserve_access_index));
struct dentry___fslat {
	struct dentry___fslat *d_parent;
	struct qstr___fslat d_name;
} __attribute__((preserve_access_index));
struct vfsmount___fslat {
	struct dentry___fslat *mnt_root;
} __attribute__((preserve_access_index));
struct mount___fslat {
	struct mount___fslat *mnt_parent;
	struct dentry___fslat *mnt_mountpoint;
	struct vfsmount___fslat mnt;
} __attribute__((preserve_access_index));
struct path___fslat {
	struct vfsmount___fslat *mnt;
	struct dentry___fslat *dentry;
} __attribute__((preserve_access_index));
struct file___fslat {
	struct path___fslat f_path;
} __attribute__((preserve_access_index));

/*
 * State of one path() between bpf_loop steps (bpf_loop keeps the verifier's work linear in
 * the loop body instead of exponential in the iterations). It lives in the scratch map,
 * not on the stack: kernels before 6.7 verify a bpf_loop callback once, with the caller's
 * stack as it was at the call (n = 0, more = false), and then remove the branches that
 * state says are never taken (`n >= FSLAT_PATH_DEPTH`, `if (w->more)`), so on 6.1 a deep
 * path came out as a wrong component with no leaf and no "...". Map memory is never
 * assumed to hold a known value, so every kernel runs the code as written.
 */
struct fslat_path_walk {
	struct dentry___fslat *d;
	struct mount___fslat *m;
	/* Where the walk stops besides the namespace's root (NULL: nowhere else). */
	struct dentry___fslat *root_d;
	struct vfsmount___fslat *root_m;
	__u32 n;
	__u32 off;
	bool more;
};

/* Twice the cap, so a read of FSLAT_PATH_CAP bytes at any offset below the cap fits. */
struct fslat_path_scratch {
	const void *names[FSLAT_PATH_DEPTH];
	char buf[FSLAT_PATH_CAP * 2];
	struct fslat_path_walk w;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fslat_path_scratch);
} FSLAT_PATH_SCRATCH_MAP SEC(".maps");

static struct fslat_path_scratch *fslat_path_buf(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&FSLAT_PATH_SCRATCH_MAP, &zero);
}

/* One step up: to the parent dentry, or across a mount point; 1 ends the walk. */
static long fslat_path_up(__u64 i, void *ctx)
{
	struct fslat_path_scratch *s = fslat_path_buf();
	if (!s)
		return 1;
	struct fslat_path_walk *w = &s->w;
	/* Locals, so CO-RE relocations name the kernel's types, not the walk's. */
	struct dentry___fslat *d = w->d;
	struct mount___fslat *m = w->m;
	if (d == w->root_d && (void *)m + bpf_core_field_offset(struct mount___fslat, mnt) == w->root_m)
		return 1;
	if (d == BPF_CORE_READ(m, mnt.mnt_root)) {
		struct mount___fslat *parent = BPF_CORE_READ(m, mnt_parent);
		if (parent == m)
			return 1;
		w->d = BPF_CORE_READ(m, mnt_mountpoint);
		w->m = parent;
		return 0;
	}
	struct dentry___fslat *up = BPF_CORE_READ(d, d_parent);
	if (!up || up == d)
		return 1;
	if (w->n >= FSLAT_PATH_DEPTH) {
		w->more = true;
		return 1;
	}
	s->names[w->n & (FSLAT_PATH_DEPTH - 1)] = BPF_CORE_READ(d, d_name.name);
	w->n++;
	w->d = up;
	return 0;
}

/* Appends "/NAME" for the i-th component from the top. */
static long fslat_path_append(__u64 i, void *ctx)
{
	struct fslat_path_scratch *s = fslat_path_buf();
	if (!s)
		return 1;
	struct fslat_path_walk *w = &s->w;
	if (i >= w->n || w->off >= FSLAT_PATH_CAP - 1)
		return 1;
	__u32 k = w->n - 1 - (__u32)i;
	__u32 off = w->off & (FSLAT_PATH_CAP - 1);
	s->buf[off] = '/';
	off = (off + 1) & (FSLAT_PATH_CAP - 1);
	long r = bpf_probe_read_kernel_str(&s->buf[off], FSLAT_PATH_CAP,
					   s->names[k & (FSLAT_PATH_DEPTH - 1)]);
	w->off += 1 + (r > 1 ? (__u32)r - 1 : 0);
	return 0;
}

struct fs_struct___fslat {
	struct path___fslat root;
} __attribute__((preserve_access_index));
struct task_struct___fslat {
	struct fs_struct___fslat *fs;
} __attribute__((preserve_access_index));

/* The file's path; with `task_root`, from the current task's root directory (what a
 * chroot sees), else from the mount namespace's root (path()). */
static __always_inline void fslat_path_from(char *dst, const void *file, bool task_root)
{
	struct fslat_path_scratch *s = fslat_path_buf();
	if (!s) {
		dst[0] = 0;
		return;
	}
	struct fslat_path_walk *w = &s->w;
	struct file___fslat *f = (struct file___fslat *)file;
	struct vfsmount___fslat *vm = BPF_CORE_READ(f, f_path.mnt);
	w->d = BPF_CORE_READ(f, f_path.dentry);
	w->m = (void *)vm - bpf_core_field_offset(struct mount___fslat, mnt);
	w->root_d = NULL;
	w->root_m = NULL;
	if (task_root) {
		struct task_struct___fslat *task = (void *)bpf_get_current_task();
		w->root_d = BPF_CORE_READ(task, fs, root.dentry);
		w->root_m = BPF_CORE_READ(task, fs, root.mnt);
	}
	w->n = 0;
	w->off = 0;
	w->more = false;
	bpf_loop(FSLAT_PATH_DEPTH + 8, fslat_path_up, NULL, 0);
	if (w->more) {
		s->buf[0] = '.';
		s->buf[1] = '.';
		s->buf[2] = '.';
		w->off = 3;
	}
	bpf_loop(FSLAT_PATH_DEPTH, fslat_path_append, NULL, 0);
	__u32 off = w->off;
	if (w->n == 0 && !w->more) {
		s->buf[0] = '/';
		off = 1;
	}
	if (off >= FSLAT_PATH_CAP - 1) {
		/* Too long: keep the start, mark the cut. */
		s->buf[FSLAT_PATH_CAP - 4] = '.';
		s->buf[FSLAT_PATH_CAP - 3] = '.';
		s->buf[FSLAT_PATH_CAP - 2] = '.';
		off = FSLAT_PATH_CAP - 1;
	}
	s->buf[off & (FSLAT_PATH_CAP - 1)] = 0;
	bpf_probe_read_kernel(dst, FSLAT_PATH_CAP, s->buf);
}

static __always_inline void fslat_path(char *dst, const void *file)
{
	fslat_path_from(dst, file, false);
}
#endif /* FSLAT_WANT_PATH */

#endif /* FSLAT_PATH_BPF_H */
