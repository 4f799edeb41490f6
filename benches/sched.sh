#!/usr/bin/env bash
# Issue 43's benchmark, inside the Linux 7.2 guest under -icount (one boot):
# 1. per call: `{ emit latency, oncpu, offcpu }` with a threshold never met, next to the
#    same `{ emit latency }` (N one-byte preads; target: the overhead at most 1.3x);
# 2. per context switch, with no traced call in flight (pingpong: two threads passing a
#    byte over pipes): fslat's scheduler hooks (a script that names oncpu, for a function
#    the workload never calls) next to no tracer (target: at most 1.15x the time) and next
#    to benches/sched.bt, bpftrace keeping the same totals in maps (target: fslat's
#    overhead at most 0.7x bpftrace's).
# Run it as
#   tests/vm/run -n --icount --timeout 2400 -- env BENCH_BIN=DIR BENCH_FSLAT=FSLAT \
#       BENCH_ROOT=BPFTRACE_ROOT bash benches/sched.sh
# (DIR: benches/run's target/bench/bin, with workload, harness and pingpong; BPFTRACE_ROOT:
# its target/bench/bpftrace-root). Markdown report on stdout; progress on stderr.
set -uo pipefail

ROOT=${BENCH_ROOT:?}

. "$(dirname "$0")/common.sh"
bench_env
P=${BENCH_TRIPS:-20000}
PP="$B/pingpong"

LAT='session vfs_read where latency > 10s { emit latency }'
SCHED='session vfs_read where latency > 10s { emit latency, oncpu, offcpu }'
IDLE='session vfs_fsync { emit latency, oncpu, offcpu }'
BT=$(grep -v '^//' "$(dirname "$0")/sched.bt")

mount_root "$ROOT"
for f in "$FSLAT" "$(readlink -f "$(command -v clang)")" "$ROOT/usr/bin/bpftrace" "$PP"; do cat "$f" >/dev/null; done
for s in "$LAT" "$SCHED" "$IDLE"; do "$FSLAT" -o /dev/null -d 1 -e "$s" >&2; done # objects into the cache
chroot "$ROOT" bpftrace --version >&2
settle

declare -A PC
percall() { # KEY WORKLOAD READY SIGNAL TRACER...
    local key=$1 work=$2 ready=$3 sig=$4 r
    shift 4
    for r in $(seq "$REPS"); do
        run_case "$key.$r" "$ready" "$sig" --then "$work" -- "$@"
    done
    PC[$key]=$(for r in $(seq "$REPS"); do get ns_per_call "$T/$key.$r.h"; done | median)
}
nones() { # KEY WORKLOAD
    for r in $(seq "$REPS"); do $2 >"$T/$1.$r.h"; done
    PC[$1]=$(for r in $(seq "$REPS"); do get ns_per_call "$T/$1.$r.h"; done | median)
}

nones none "$W $N"
percall lat "$W $N" Tracing TERM "$FSLAT" -o /dev/null -e "$LAT"
percall sched "$W $N" Tracing TERM "$FSLAT" -o /dev/null -e "$SCHED"
nones pp_none "$PP $P"
percall pp_fslat "$PP $P" Tracing TERM "$FSLAT" -o /dev/null -e "$IDLE"
percall pp_bt "$PP $P" "Attached " INT chroot "$ROOT" bpftrace -e "$BT"
nones pp_none2 "$PP $P"

f0() { awk -v x="$1" 'BEGIN { printf "%.0f", x }'; }
ov() { awk -v a="$1" -v z="$2" 'BEGIN { printf "%.0f", a - z }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 <= 0) print "–"; else printf "%.2f", a / b }'; }
lat_ov=$(ov "${PC[lat]}" "${PC[none]}")
sched_ov=$(ov "${PC[sched]}" "${PC[none]}")
pp_fs=$(ov "${PC[pp_fslat]}" "${PC[pp_none]}")
pp_bt=$(ov "${PC[pp_bt]}" "${PC[pp_none]}")
echo "### Where a call's time went: what it costs (issue 43)"
echo
echo "Kernel $(uname -r), $(chroot "$ROOT" bpftrace --version); median of $REPS runs, guest ns"
echo "under -icount."
echo
echo "Per call (\`workload $N\`: one-byte preads; no tracer $(f0 "${PC[none]}") ns/call):"
echo
echo "| script | ns/call | overhead |"
echo "|---|---:|---:|"
echo "| \`$LAT\` | $(f0 "${PC[lat]}") | $lat_ov |"
echo "| \`$SCHED\` | $(f0 "${PC[sched]}") | $sched_ov |"
echo
echo "The scheduler figures' overhead over \`{ emit latency }\`'s: $(ratio "$sched_ov" "$lat_ov")× (target ≤ 1.3×)."
echo
echo "Per context switch, no traced call in flight (\`pingpong $P\`: two threads, one byte"
echo "over two pipes, two switches a round trip; no tracer $(f0 "${PC[pp_none]}") ns/switch, $(f0 "${PC[pp_none2]}") after the traced runs):"
echo
echo "| tracer | ns/switch | overhead | × no tracer |"
echo "|---|---:|---:|---:|"
echo "| fslat \`$IDLE\` | $(f0 "${PC[pp_fslat]}") | $pp_fs | $(ratio "${PC[pp_fslat]}" "${PC[pp_none]}")× |"
echo "| bpftrace, benches/sched.bt (the same totals in maps) | $(f0 "${PC[pp_bt]}") | $pp_bt | $(ratio "${PC[pp_bt]}" "${PC[pp_none]}")× |"
echo
echo "fslat / bpftrace overhead per switch: $(ratio "$pp_fs" "$pp_bt")× (target ≤ 0.7×); fslat /"
echo "no tracer: $(ratio "${PC[pp_fslat]}" "${PC[pp_none]}")× (target ≤ 1.15×)."
