#!/usr/bin/env bash
# Three rows the benchmark lacked, inside the Linux 7.x guest under -icount (one boot),
# each next to what a bpftrace user would run (docs/performance.md, "Module functions,
# several tracepoints and the uprobe guard"):
# 1. module: a kernel module's function (null_blk's null_queue_rq, the module cases'),
#    per call (`blockreads N /dev/nullb0`: direct 4 KiB reads, one request each) for
#    `session null_blk:null_queue_rq { count() }` and `on null_blk:null_queue_rq
#    { count() }` against bpftrace's `fentry:null_blk:null_queue_rq { @ = count(); }`;
#    and start-up: `fslat -l 'null_blk:*'` against `bpftrace -l 'fentry:null_blk:*'`, and
#    a session of a module glob (and of a bare module function, which reads every
#    module's BTF) to its `Tracing` line against bpftrace's glob to its `Attached`.
# 2. tracepoints: `on tp:sched:sched_* { count() by probe }` against bpftrace's
#    `tracepoint:sched:sched_* { @[probe] = count(); }`, per context switch of pingpong
#    (each switch fires several of them) and start-up.
# 3. guard: a uprobe session's per call (`uloop N`) with the preemption guard of 6.13+
#    (templates/program_head) and without it: the second fslat compiles with
#    benches/clang-no-guard, which strips the guard's two calls from the C (bench only;
#    no fslat option turns it off).
# BENCH_ROWS: any of "module tracepoints guard" (default all three).
# Run it as benches/points does:
#   tests/vm/run -n --icount --timeout 2400 -- env BENCH_BIN=DIR BENCH_FSLAT=FSLAT \
#       BENCH_ROOT=BPFTRACE_ROOT bash benches/points.sh
# Markdown report on stdout; progress on stderr.
set -uo pipefail
ROOT=${BENCH_ROOT:?}
. "$(dirname "$0")/common.sh"
bench_env
here=$(cd "$(dirname "$0")" && pwd)
ROWS=${BENCH_ROWS:-module tracepoints guard}
P=${BENCH_TRIPS:-$N}
want() { [[ " $ROWS " == *" $1 "* ]]; }
now_ns() { date +%s%N; }

mount_root "$ROOT"
BT_VERSION=$(chroot "$ROOT" bpftrace --version | awk '{ print $2 }')
for f in "$FSLAT" "$(readlink -f "$(command -v clang)")" "$ROOT/usr/bin/bpftrace"; do cat "$f" >/dev/null; done

# The loop LOOP... under a tracer (READY on its stderr), REPS times after a warm-up run
# (clang, caches): the median of its ns_per_call.
once() { # LOOP READY CMD...
    local loop=$1
    shift
    start_tracer "$@" || return
    $loop | per_call | tee -a "$T/runs"
    stop_tracer
    log "$(grep -v '^$' "$T/out" | head -3 | tr '\n' ' ')"
}
row() { # LABEL LOOP READY CMD...
    local label=$1 v
    shift
    : >"$T/runs"
    v=$(median_of_runs once "$@")
    log "$label: $v ns/call (the warm-up, then each run: $(tr '\n' ' ' <"$T/runs"))"
    echo "$label|$v"
}
untraced() { for _ in $(seq "$REPS"); do $1 | per_call; done | median; }
# Guest ms from start to READY on stderr (the tracer then stopped), median of REPS after
# a warm-up run.
startup() { # READY CMD...
    local r t0 t1
    start_tracer "$@" && stop_tracer
    for r in $(seq "$REPS"); do
        t0=$(now_ns)
        start_tracer "$@" && t1=$(now_ns) && stop_tracer && echo $(((t1 - t0) / 1000000))
    done | median
}
# Guest ms a listing takes, median of REPS after a warm-up run; its line count to stderr.
listing() { # CMD...
    local r t0 t1
    "$@" >"$T/list" 2>&1
    log "$* lists $(wc -l <"$T/list") lines"
    for r in $(seq "$REPS"); do
        t0=$(now_ns)
        "$@" >/dev/null 2>&1
        t1=$(now_ns)
        echo $(((t1 - t0) / 1000000))
    done | median
}
table() { # NONE ROWS: the per-call rows with overhead and the ratio to the last row's
    local none=$1 rows=$2 last
    last=$(echo "$rows" | tail -1 | cut -d'|' -f2)
    echo "$rows" | while IFS='|' read -r label v; do
        awk -v l="$label" -v v="$v" -v n="$none" -v b="$last" 'BEGIN {
            o = v - n; ob = b - n
            printf "| %s | %.0f | %.0f | %.2f× |\n", l, v, o, (ob > 0 ? o / ob : 0) }'
    done
}

echo "### Module functions, several tracepoints and the uprobe guard"
echo
echo "Kernel $(uname -r), bpftrace $BT_VERSION; median of $REPS runs, guest time under -icount,"
echo "each tracer after one untimed run (clang, caches)."
echo

if want module; then
    python3 "$here/../tests/kernel/load-module" null_blk nr_devices=1 irqmode=0 gb=1 >&2 ||
        log "null_blk did not load"
    for _ in $(seq 100); do [[ -b /dev/nullb0 ]] && break; sleep 0.1; done
    BR="$B/blockreads $N /dev/nullb0"
    none=$(untraced "$BR")
    rows=$(
        row "fslat \`session null_blk:null_queue_rq { count() }\`" "$BR" Tracing "$FSLAT" -e 'session null_blk:null_queue_rq { count() }'
        row "fslat \`session null_blk:null_queue_rq { count() }\`, \`--mode fsession\`" "$BR" Tracing "$FSLAT" --mode fsession -e 'session null_blk:null_queue_rq { count() }'
        row "fslat \`on null_blk:null_queue_rq { count() }\`" "$BR" Tracing "$FSLAT" -e 'on null_blk:null_queue_rq { count() }'
        row "bpftrace \`fentry:null_blk:null_queue_rq { @ = count(); }\`" "$BR" "Attached " chroot "$ROOT" bpftrace -e 'fentry:null_blk:null_queue_rq { @ = count(); }'
    )
    echo "#### A kernel module's function: null_blk's \`null_queue_rq\`"
    echo
    echo "Per call: \`blockreads $N /dev/nullb0\` (benches/c/blockreads.c: direct 4 KiB reads of"
    echo "null_blk loaded with \`irqmode=0\`, one request and one \`null_queue_rq\` call each; untraced"
    echo "$none guest-ns a read). The ratio is the row's overhead over bpftrace's."
    echo
    echo "| tracer | guest-ns a read | overhead | × bpftrace |"
    echo "|---|---:|---:|---:|"
    table "$none" "$rows"
    echo
    list_fs=$(listing "$FSLAT" -l 'null_blk:*')
    list_fs_n=$(wc -l <"$T/list")
    list_bt=$(listing chroot "$ROOT" bpftrace -l 'fentry:null_blk:*')
    list_bt_n=$(wc -l <"$T/list")
    vfs_fs=$(listing "$FSLAT" -l 'vfs_*')
    vfs_fs_n=$(wc -l <"$T/list")
    vfs_bt=$(listing chroot "$ROOT" bpftrace -l 'fentry:vmlinux:vfs_*')
    vfs_bt_n=$(wc -l <"$T/list")
    glob_fs=$(startup Tracing "$FSLAT" -o /dev/null -e 'session null_blk:null_* { count() }')
    bare_fs=$(startup Tracing "$FSLAT" -o /dev/null -e 'session null_queue_rq { count() }')
    glob_bt=$(startup "Attached " chroot "$ROOT" bpftrace -e 'fentry:null_blk:null_* { @[probe] = count(); }')
    echo "Start-up, guest ms (a listing: to its exit; a session: to \`Tracing\`, bpftrace's to"
    echo "\`Attached\`; the object in fslat's cache):"
    echo
    echo "| what | fslat | bpftrace |"
    echo "|---|---:|---:|"
    echo "| \`-l 'null_blk:*'\` / \`-l 'fentry:null_blk:*'\` ($list_fs_n / $list_bt_n lines) | $list_fs | $list_bt |"
    echo "| \`-l 'vfs_*'\` / \`-l 'fentry:vmlinux:vfs_*'\` (vmlinux, for comparison; $vfs_fs_n / $vfs_bt_n lines) | $vfs_fs | $vfs_bt |"
    echo "| \`session null_blk:null_* { count() }\` / \`fentry:null_blk:null_* { @[probe] = count(); }\` | $glob_fs | $glob_bt |"
    echo "| \`session null_queue_rq { count() }\` (no module named: every module's BTF read) | $bare_fs | – |"
    echo
fi

if want tracepoints; then
    PP="$B/pingpong $P"
    none=$(untraced "$PP")
    fs_tp='on tp:sched:sched_* { count() by probe }'
    bt_tp='tracepoint:sched:sched_* { @[probe] = count(); }'
    rows=$(
        row "fslat \`$fs_tp\`" "$PP" Tracing "$FSLAT" -o /dev/null -e "$fs_tp"
        row "bpftrace \`$bt_tp\`" "$PP" "Attached " chroot "$ROOT" bpftrace -e "$bt_tp"
    )
    # What each counted in one more run: the tracepoints that fired, and how many
    # bpftrace attached.
    start_tracer Tracing "$FSLAT" -e "$fs_tp" && $PP >/dev/null && stop_tracer
    fs_fired=$(grep -c 'sched_' "$T/out")
    cp "$T/out" "$T/fs-tp.out"
    start_tracer "Attached " chroot "$ROOT" bpftrace -e "$bt_tp" && $PP >/dev/null && stop_tracer
    bt_fired=$(grep -c '^@\[tracepoint:sched:' "$T/out")
    bt_points=$(sed -n 's/^Attached \([0-9]*\) probes.*/\1/p' "$T/err")
    log "fslat's counts: $(tr '\n' ' ' <"$T/fs-tp.out")"
    log "bpftrace's counts: $(tr '\n' ' ' <"$T/out")"
    up_fs=$(startup Tracing "$FSLAT" -o /dev/null -e "$fs_tp")
    up_bt=$(startup "Attached " chroot "$ROOT" bpftrace -e "$bt_tp")
    echo "#### \`on\` of several tracepoints: \`sched_*\`"
    echo
    echo "Per context switch: \`pingpong $P\` (benches/c/pingpong.c: two threads passing a byte"
    echo "over two pipes; each switch fires several \`sched_*\` tracepoints: switch, waking,"
    echo "wakeup, stat_runtime...; untraced $none guest-ns a switch). bpftrace attached"
    echo "${bt_points:-?} probes; in one run each, $fs_fired tracepoints fired for fslat and $bt_fired for bpftrace."
    echo
    echo "| tracer | guest-ns a switch | overhead | × bpftrace |"
    echo "|---|---:|---:|---:|"
    table "$none" "$rows"
    echo
    echo "Start-up to \`Tracing\` (fslat, object cached) and to \`Attached\` (bpftrace), guest ms:"
    echo "fslat $up_fs, bpftrace $up_bt."
    echo
fi

if want guard; then
    cp "$B/uloop" /tmp/uloop
    UL="/tmp/uloop $N"
    none=$(untraced "$UL")
    prog='session /tmp/uloop:work { count() }'
    guarded=$("$FSLAT" --emit c -e "$prog" 2>/dev/null | grep -c 'bpf_preempt_disable();')
    # The objects each row loads: the kfuncs' names are in the guarded one only.
    "$FSLAT" --emit obj -o "$T/guard.o" -e "$prog" 2>/dev/null
    XDG_CACHE_HOME="$T/noguard" "$FSLAT" --clang "$here/clang-no-guard" --emit obj -o "$T/noguard.o" -e "$prog" 2>/dev/null
    log "bpf_preempt_* names in the objects: guarded $(grep -ac bpf_preempt_ "$T/guard.o"), stripped $(grep -ac bpf_preempt_ "$T/noguard.o")"
    rows=$(
        row "fslat \`$prog\`, no guard (benches/clang-no-guard)" "$UL" Tracing env XDG_CACHE_HOME="$T/noguard" "$FSLAT" --clang "$here/clang-no-guard" -e "$prog"
        row "fslat \`$prog\`, with the guard (as shipped)" "$UL" Tracing "$FSLAT" -e "$prog"
    )
    echo "#### The preemption guard of uprobe programs (6.13+)"
    echo
    echo "Per call: \`uloop $N\` (benches/c/uloop.c, a noinline \`work(i)\`; untraced $none"
    echo "guest-ns a call), a uprobe session (\`mode=uprobe-session\`) whose program runs its body"
    echo "between \`bpf_preempt_disable()\` and \`bpf_preempt_enable()\` ($guarded guarded program(s) in"
    echo "\`--emit c\`), and the same C with the two calls stripped. The ratio is the"
    echo "overhead over the guarded row's."
    echo
    echo "| tracer | guest-ns a call | overhead | × guarded |"
    echo "|---|---:|---:|---:|"
    table "$none" "$rows"
    echo
fi
