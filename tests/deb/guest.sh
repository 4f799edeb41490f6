#!/usr/bin/env bash
# Inside the Linux 7.2 guest (tests/deb/run): the installed package, chrooted into the
# Debian root it was installed in. Prints one line per check; exit 1 on any failure.
set -uo pipefail
root=${1:?the root}
mount -t proc proc "$root/proc" && mount -t sysfs sysfs "$root/sys" &&
    mount -t bpf bpf "$root/sys/fs/bpf" && mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup" &&
    mount --rbind /dev "$root/dev" && mount -t tmpfs tmpfs "$root/tmp" ||
    { echo "FAIL mounts"; exit 1; }
failed=0
check() { # NAME: the rest of the line is a shell condition
    local name=$1
    shift
    if eval "$@"; then echo "ok   $name"; else echo "FAIL $name"; failed=1; fi
}
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp "$@"; }

version=$(in_root fslat --version 2>&1)
check "fslat --version: $version" '[[ $version =~ ^fslat\ [0-9]+\.[0-9]+\.[0-9]+$ ]]'
check "no clang in the root" '! in_root sh -c "command -v clang" >/dev/null'
man=$(in_root env MANPAGER=cat MANWIDTH=80 man fslat 2>&1)
check "man fslat: NAME, the build subcommand, EXIT STATUS" 'grep -q "^NAME" <<<"$man" && grep -q "^   fslat build$" <<<"$man" && grep -q "^EXIT STATUS" <<<"$man"'
echo "$man" | head -8 | sed 's/^/    /'
# dd makes exactly 300 one-byte reads (and one that returns 0 at the end it never reaches).
out=$(in_root fslat /var/tmp/reads.fslb -c "dd if=/dev/zero of=/dev/null bs=1 count=300 status=none" 2>&1)
echo "$out" | sed 's/^/    /'
check "the bundle counted dd's 300 reads" 'grep -qE "^  30[0-9]$" <<<"$out"'
# 7.2 preempts BPF programs: auto runs kernel sessions as kprobes there (exact counts),
# and a count() needs nothing at return, so one kprobe at entry (errors unknown: `-`);
# the bundle holds that variant.
check "the bundle attached as a kprobe at entry, errors=-" 'grep -qE "^Tracing 1 session \(vfs_read, kprobe\)" <<<"$out" && grep -qE "^SUMMARY vfs_read mode=kprobe .*errors=- " <<<"$out"'
exit $failed
