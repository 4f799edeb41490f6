#!/usr/bin/env bash
# Runs inside the Linux 7.x guest booted by benches/usdt (tests/vm/run --icount).
# Report (Markdown) on stdout.
set -uo pipefail
ROOT=${BENCH_ROOT:?}
. "$(dirname "$0")/common.sh"
bench_env
mount_root "$ROOT"
# The traced program where bpftrace in its root sees it too (the same inode).
cp "$B/usdtloop" "$ROOT/tmp/"
U=$ROOT/tmp/usdtloop
once() { # LOOP READY CMD...: the loop's ns per call while CMD traces
    local loop=$1
    shift
    start_tracer "$@" || return
    "$loop" "$N" | per_call
    stop_tracer
    grep -h 'SUMMARY\|^@' "$T/out" | head -2 >&2
}
row() { # LABEL LOOP READY CMD...: a warm-up run (compiles, caches), then REPS timed runs
    local label=$1
    shift
    local v
    v=$(median_of_runs once "$@")
    log "$label: $v ns/call"
    echo "$label|$v"
}
none() { # LOOP
    for _ in $(seq "$REPS"); do "$1" "$N" | per_call; done | median
}
table() { # NONE ROWS: the rows with their overhead, and the ratio to the last row's
    local n=$1 rows=$2 bt
    bt=$(echo "$rows" | tail -1 | cut -d'|' -f2)
    echo "| tracer | guest-ns per call | overhead | overhead vs bpftrace's |"
    echo "|---|---|---|---|"
    echo "$rows" | while IFS='|' read -r label v; do
        awk -v l="$label" -v v="$v" -v n="$n" -v b="$bt" 'BEGIN {
            o = v - n; ob = b - n
            printf "| %s | %.0f | %.0f | %.2fx |\n", l, v, o, (ob > 0 ? o / ob : 0) }'
    done
}

btv=$(chroot "$ROOT" bpftrace --version | awk '{ print $2 }')
usdt_none=$(none "$U")
usdt_rows=$(
    row "fslat \`on usdt:...:tick { count() }\`" "$U" Tracing "$FSLAT" -e "on usdt:$U:tick { count() }"
    row "bpftrace $btv \`usdt:...:tick { @ = count(); }\`" "$U" "Attached " chroot "$ROOT" bpftrace -e 'usdt:/tmp/usdtloop:fslat:tick { @ = count(); }'
)
echo "### Per-call overhead of a USDT point (issue 46)"
echo
echo "N=$N firings of \`fslat:tick\` (one argument) in a static C loop (benches/c/usdtloop.c),"
echo "median of $REPS runs, guest-ns per call under -icount; overhead is the row minus the"
echo "untraced loop ($usdt_none guest-ns per call). Both attach one uprobe per site; the"
echo "action counts into one key."
echo
table "$usdt_none" "$usdt_rows"
echo

kf_none=$(none "$W")
kf_rows=$(
    row "fslat \`on vfs_read { count() }\` (fentry)" "$W" Tracing "$FSLAT" -e 'on vfs_read { count() }'
    row "bpftrace $btv \`kprobe:vfs_read { @ = count(); }\`" "$W" "Attached " chroot "$ROOT" bpftrace -e 'kprobe:vfs_read { @ = count(); }'
    row "bpftrace $btv \`fentry:vfs_read { @ = count(); }\`" "$W" "Attached " chroot "$ROOT" bpftrace -e 'fentry:vfs_read { @ = count(); }'
)
echo "### Per-call overhead of an \`on\` kernel function point (issue 46)"
echo
echo "\`workload N\`: N=$N × \`pread(fd, buf, 1, 0)\` on a tmpfs file (one \`vfs_read\` each),"
echo "median of $REPS runs, guest-ns per call under -icount; overhead is the row minus the"
echo "untraced loop ($kf_none guest-ns per call); the last column compares with bpftrace's"
echo "fentry: row (the same attachment)."
echo
table "$kf_none" "$kf_rows"
