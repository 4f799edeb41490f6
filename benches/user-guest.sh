#!/usr/bin/env bash
# Runs inside the Linux 7.x guest booted by benches/user (tests/vm/run --icount).
# Report (Markdown) on stdout.
set -uo pipefail
ROOT=${BENCH_ROOT:?}
. "$(dirname "$0")/common.sh"
bench_env
N=${BENCH_N:-200000}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

mount_root "$ROOT"
# The traced programs, where bpftrace in its root sees them too (the same inodes).
cp "$B/uloop" "$B/umany" "$ROOT/tmp/"
U=$ROOT/tmp/uloop
offset=$("$FSLAT" -lv "$U:work" 2>/dev/null | sed -n 's/.*offset \(0x[0-9a-f]*\).*/\1/p')
log "work at $offset"

loop() { "$U" "$N" | per_call; }
once() { # READY CMD...
    start_tracer "$@" || return
    loop
    stop_tracer
    grep -h 'SUMMARY\|calls=' "$T/out" | head -2 >&2
}
row() { # LABEL READY CMD...: a warm-up run (compiles, caches), then REPS timed runs
    local label=$1
    shift
    local v
    v=$(median_of_runs once "$@")
    log "$label: $v ns/call"
    echo "$label|$v"
}

bt_script='uprobe:/tmp/uloop:work { @s[tid] = nsecs; } uretprobe:/tmp/uloop:work /@s[tid]/ { @h = hist((nsecs - @s[tid]) / 1000); delete(@s[tid]); }'
none=$(for _ in $(seq "$REPS"); do loop; done | median)
rows=$(
    row "hand-written C uprobe-session tool (libbpf)" Attached "$B/uloader" "$B/usession.bpf.o" "$U" "$offset"
    row "fslat \`{ hist(latency) }\`, uprobe-session" Tracing "$FSLAT" --mode uprobe-session -e "session $U:work { hist(latency) }"
    row "fslat \`{ hist(latency) }\`, uprobe (uprobe_multi pair)" Tracing "$FSLAT" --mode uprobe -e "session $U:work { hist(latency) }"
    row "bpftrace $(chroot "$ROOT" bpftrace --version | awk '{ print $2 }') uprobe + uretprobe, \`@h = hist(...)\`" "Attached " chroot "$ROOT" bpftrace -e "$bt_script"
)
echo "### Per-call overhead of a user session (issue 22)"
echo
echo "N=$N calls of a noinline \`work(i)\` in a static C program (benches/c/uloop.c), median of"
echo "$REPS runs, guest-ns per call under -icount; overhead is the row minus the untraced loop"
echo "($none guest-ns per call)."
echo
echo "| tracer on \`work\` | guest-ns per call | overhead | overhead vs the C tool | overhead vs bpftrace |"
echo "|---|---|---|---|---|"
ctool=$(echo "$rows" | sed -n 1p | cut -d'|' -f2)
bt=$(echo "$rows" | sed -n 4p | cut -d'|' -f2)
echo "$rows" | while IFS='|' read -r label v; do
    awk -v l="$label" -v v="$v" -v n="$none" -v c="$ctool" -v b="$bt" 'BEGIN {
        o = v - n; oc = c - n; ob = b - n
        printf "| %s | %.0f | %.0f | %.2fx | %.2fx |\n", l, v, o, (oc > 0 ? o / oc : 0), (ob > 0 ? o / ob : 0) }'
done
echo

echo "### Time to attach to many functions of one file"
echo
echo "From start to fslat's \`Tracing\` line, guest ms under -icount, with the object already"
echo "in fslat's cache (a second run); benches/user's 1000 functions \`uf000\`..\`uf999\` (static, -O2)."
echo
echo "| functions | uprobe-session | uprobe (uprobe_multi pair) |"
echo "|---|---|---|"
for spec in "1 uf000" "100 uf0??" "1000 uf???"; do
    set -- $spec
    cells=""
    for mode in uprobe-session uprobe; do
        prog="session $ROOT/tmp/umany:$2 { count() }"
        start_tracer Tracing "$FSLAT" --mode "$mode" -e "$prog" && stop_tracer
        t0=$(now_ms)
        start_tracer Tracing "$FSLAT" --mode "$mode" -e "$prog" && t1=$(now_ms) && stop_tracer
        grep -h SUMMARY "$T/out" | head -1 >&2
        cells="$cells | $((t1 - t0))"
    done
    echo "| $1$cells |"
done
echo

echo "### Side by side with bpftrace: the same sleeps"
echo
echo "fslat and bpftrace attached at the same time to \`nap\` of benches/c/uloop.c, which"
echo "then sleeps 1 ms five times and 4 ms three times (guest time)."
echo
start_tracer Tracing "$FSLAT" -e "session $U:nap { count(); hist(latency) }"
fslat_pid=$tracer
cp "$T/err" "$T/fslat.err"
mv "$T/out" "$T/fslat.out.tmp" 2>/dev/null
bt_nap='uprobe:/tmp/uloop:nap { @s[tid] = nsecs; } uretprobe:/tmp/uloop:nap /@s[tid]/ { @calls = count(); @us = hist((nsecs - @s[tid]) / 1000); delete(@s[tid]); }'
chroot "$ROOT" bpftrace -e "$bt_nap" >"$T/bt.out" 2>"$T/bt.err" &
bt_pid=$!
for _ in $(seq 6000); do grep -q "Attached " "$T/bt.err" && break; sleep 0.01; done
"$U" nap 1 5
"$U" nap 4 3
kill -INT "$bt_pid"; wait "$bt_pid"
tracer=$fslat_pid
stop_tracer
echo '```'
echo "\$ fslat -e 'session /tmp/uloop:nap { count(); hist(latency) }'"
cat "$T/fslat.out.tmp" "$T/out" 2>/dev/null | grep -v '^$'
echo
echo "\$ bpftrace -e '$bt_nap'"
grep -v '^$' "$T/bt.out"
echo '```'
