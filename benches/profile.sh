#!/usr/bin/env bash
# Issue 44's benchmark, inside the Linux 7.2 guest under -icount (one boot, 1 CPU):
# 1. profile at 99 Hz on a busy thread (benches/c/busy.c: the same work every run, about
#    5 s of guest time): `profile 99hz { count() by ustack, kstack }` next to bpftrace's
#    `profile:hz:99 { @[ustack, kstack] = count(); }`; the overhead is the run's time less
#    the untraced run's (target: fslat's at most 0.8x bpftrace's);
# 2. off-CPU per context switch (benches/c/pingpong.c): `offcpu { sum(latency) by kstack }`
#    next to libbpf-tools' offcputime (Debian's libbpf-tools, from the host's /; it always
#    keeps user and kernel stacks, so fslat's `by ustack, kstack` is a row too) (target:
#    fslat's overhead at most 1.0x offcputime's).
# Each row's warm-up run has the kernel's BPF statistics on (kernel.bpf_stats_enabled):
# the programs' own runs and time, printed under the table; the timed runs have them off.
# Run it with benches/run: BENCH_GUEST=benches/profile.sh BENCH_NO_DOC=1 benches/run
# (BENCH_ROWS=busy or BENCH_ROWS=pingpong runs one of the two parts; both by default)
# (it needs target/bench/bin with busy, pingpong, harness and workload, the bpftrace root).
# Markdown report on stdout; progress on stderr.
set -uo pipefail

ROOT=${BENCH_ROOT:?}

. "$(dirname "$0")/common.sh"
bench_env
P=${BENCH_TRIPS:-20000}
M=${BENCH_BUSY:-800}
PP="$B/pingpong"
BUSY="$B/busy"
OFFCPUTIME=${BENCH_OFFCPUTIME:-/usr/sbin/offcputime}

PROF='profile 99hz { count() by ustack, kstack }'
ROWS=${BENCH_ROWS:-busy pingpong}
BT_PROF='profile:hz:99 { @[ustack, kstack] = count(); }'
OFF='offcpu { sum(latency) by kstack }'
OFF_US='offcpu { sum(latency) by ustack, kstack }'

mount_root "$ROOT"
# offcputime prints nothing until it stops: this prints "Attached" once its program is
# attached (a bpf_link among its descriptors) and passes the stop signal on as SIGINT.
cat >"$T/offcputime-ready" <<EOS
#!/bin/bash
"$OFFCPUTIME" >/dev/null &
p=\$!
trap 'kill -INT \$p' INT TERM
until ls -l /proc/\$p/fd 2>/dev/null | grep -q bpf_link; do
    kill -0 \$p 2>/dev/null || exit 1
    sleep 0.01
done
echo Attached >&2
wait \$p
wait \$p
EOS
chmod +x "$T/offcputime-ready"
for f in "$FSLAT" "$(readlink -f "$(command -v clang)")" "$ROOT/usr/bin/bpftrace" "$PP" "$BUSY" "$OFFCPUTIME"; do
    cat "$f" >/dev/null
done
for s in "$PROF" "$OFF" "$OFF_US"; do "$FSLAT" -o /dev/null -d 1 -e "$s" >&2; done # objects into the cache
"$FSLAT" -o /dev/null -d 1 --ustack-bytes 0 -e "$PROF" >&2
chroot "$ROOT" bpftrace --version >&2
"$OFFCPUTIME" --version >&2 || true
settle

# The programs that ran during a warm-up (bpftool's run_cnt and run_time_ns, read while
# the tracer still runs): one line each.
stats() { # KEY
    python3 -c '
import json, sys
for p in json.load(open(sys.argv[1])):
    n, t = p.get("run_cnt", 0), p.get("run_time_ns", 0)
    if n:
        print("%s: %s %s, %d runs, %.0f ns a run" % (sys.argv[2], p["type"], p.get("name", "?"), n, t / n))
' "$T/$1.progs.json" "$1"
}

declare -A PC
row() { # KEY WORKLOAD READY SIGNAL TRACER...
    local key=$1 work=$2 ready=$3 sig=$4 r
    shift 4
    sysctl -q -w kernel.bpf_stats_enabled=1
    run_case "$key.warm" "$ready" "$sig" --then "$work" \
        --then "chroot $ROOT bpftool -j prog show >$T/$key.progs.json" -- "$@"
    sysctl -q -w kernel.bpf_stats_enabled=0
    stats "$key" >>"$T/stats"
    for r in $(seq "$REPS"); do
        run_case "$key.$r" "$ready" "$sig" --then "$work" -- "$@"
    done
    PC[$key]=$(for r in $(seq "$REPS"); do get total_ns "$T/$key.$r.h"; done | median)
    grep -h 'SUMMARY\|^profile\|^offcpu' "$T/$key.$REPS.log" 2>/dev/null | head -3 >&2
}
nones() { # KEY WORKLOAD
    for r in $(seq "$REPS"); do $2 >"$T/$1.$r.h"; done
    PC[$1]=$(for r in $(seq "$REPS"); do get total_ns "$T/$1.$r.h"; done | median)
}
: >"$T/stats"

if [[ " $ROWS " == *" busy "* ]]; then
    nones busy_none "$BUSY $M"
    row busy_fslat "$BUSY $M" Tracing TERM "$FSLAT" -o /dev/null -e "$PROF"
    row busy_fslat_fp "$BUSY $M" Tracing TERM "$FSLAT" -o /dev/null --ustack-bytes 0 -e "$PROF"
    row busy_bt "$BUSY $M" "Attached " INT chroot "$ROOT" bpftrace -e "$BT_PROF"
    nones busy_none2 "$BUSY $M"
fi
if [[ " $ROWS " == *" pingpong "* ]]; then
    nones pp_none "$PP $P"
    row pp_fslat "$PP $P" Tracing TERM "$FSLAT" -o /dev/null -e "$OFF"
    row pp_fslat_us "$PP $P" Tracing TERM "$FSLAT" -o /dev/null -e "$OFF_US"
    row pp_oct "$PP $P" Attached INT "$T/offcputime-ready"
    nones pp_none2 "$PP $P"
fi

f0() { awk -v x="$1" 'BEGIN { printf "%.0f", x }'; }
ov() { awk -v a="$1" -v z="$2" 'BEGIN { printf "%.0f", a - z }'; }
per() { awk -v a="$1" -v z="$2" -v n="$3" 'BEGIN { printf "%.0f", (a - z) / n }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 <= 0) print "–"; else printf "%.2f", a / b }'; }
echo "### Profiles and off-CPU stretches next to bpftrace and offcputime (issue 44)"
echo
echo "Kernel $(uname -r), 1 CPU, $(chroot "$ROOT" bpftrace --version), libbpf-tools"
echo "$(dpkg-query -W -f '${Version}' libbpf-tools 2>/dev/null) offcputime; median of $REPS runs, guest ns under -icount."
echo
if [[ -n ${PC[busy_none]:-} ]]; then
    # Samples due in the busy run: 99 a second of its untraced time.
    due=$(awk -v t="${PC[busy_none]}" 'BEGIN { printf "%.0f", t / 1e9 * 99 }')
    b_fs=$(ov "${PC[busy_fslat]}" "${PC[busy_none]}")
    b_fp=$(ov "${PC[busy_fslat_fp]}" "${PC[busy_none]}")
    b_bt=$(ov "${PC[busy_bt]}" "${PC[busy_none]}")
    echo "A busy thread (\`busy $M\`: $M million rounds in hot() <- work() <- main; untraced"
    echo "$(ms "${PC[busy_none]}") ms, $(ms "${PC[busy_none2]}") ms after the traced runs; about $due samples due at 99 Hz):"
    echo
    echo "| tracer | run (ms) | overhead (µs) | per sample due (ns) |"
    echo "|---|---:|---:|---:|"
    echo "| fslat \`$PROF\` | $(ms "${PC[busy_fslat]}") | $(per "$b_fs" 0 1000) | $(per "${PC[busy_fslat]}" "${PC[busy_none]}" "$due") |"
    echo "| fslat \`--ustack-bytes 0\` (frame pointers) | $(ms "${PC[busy_fslat_fp]}") | $(per "$b_fp" 0 1000) | $(per "${PC[busy_fslat_fp]}" "${PC[busy_none]}" "$due") |"
    echo "| bpftrace \`$BT_PROF\` | $(ms "${PC[busy_bt]}") | $(per "$b_bt" 0 1000) | $(per "${PC[busy_bt]}" "${PC[busy_none]}" "$due") |"
    echo
    echo "fslat / bpftrace overhead: $(ratio "$b_fs" "$b_bt")× (target ≤ 0.8×); with \`--ustack-bytes 0\`: $(ratio "$b_fp" "$b_bt")×."
    echo
fi
if [[ -n ${PC[pp_none]:-} ]]; then
    switches=$((2 * P))
    o_fs=$(ov "${PC[pp_fslat]}" "${PC[pp_none]}")
    o_us=$(ov "${PC[pp_fslat_us]}" "${PC[pp_none]}")
    o_ct=$(ov "${PC[pp_oct]}" "${PC[pp_none]}")
    echo "Context switches (\`pingpong $P\`: $switches switches; untraced $(ms "${PC[pp_none]}") ms,"
    echo "$(ms "${PC[pp_none2]}") ms after the traced runs):"
    echo
    echo "| tracer | run (ms) | overhead per switch (ns) |"
    echo "|---|---:|---:|"
    echo "| fslat \`$OFF\` | $(ms "${PC[pp_fslat]}") | $(per "$o_fs" 0 "$switches") |"
    echo "| fslat \`$OFF_US\` | $(ms "${PC[pp_fslat_us]}") | $(per "$o_us" 0 "$switches") |"
    echo "| libbpf-tools \`offcputime\` (user and kernel stacks) | $(ms "${PC[pp_oct]}") | $(per "$o_ct" 0 "$switches") |"
    echo
    echo "fslat \`by kstack\` / offcputime overhead: $(ratio "$o_fs" "$o_ct")× (target ≤ 1.0×); \`by ustack, kstack\`: $(ratio "$o_us" "$o_ct")×."
    echo
fi
echo "The programs in each row's warm-up run (kernel.bpf_stats_enabled; run time includes the helpers):"
echo
echo '```'
cat "$T/stats"
echo '```'
