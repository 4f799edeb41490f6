#!/usr/bin/env bash
# Issue 29's benchmark, inside the Linux 7.2 guest under -icount: a span from one kernel
# function to another next to bpftrace's map-based script for the same job, on the same
# workload (N one-byte preads: each enters __x64_sys_pread64, then vfs_read). Both count every
# span and build a histogram of its latency; the report gives the per-call cost (guest ns)
# of each, their ratio, and the counts each saw. Run it as
#   tests/vm/run -n --icount --timeout 2400 -- env BENCH_BIN=DIR BENCH_FSLAT=FSLAT \
#       BENCH_ROOT=BPFTRACE_ROOT bash benches/spans.sh
# (DIR: benches/run's target/bench/bin, with workload and harness; BPFTRACE_ROOT: its
# target/bench/bpftrace-root). Markdown report on stdout; progress on stderr.
set -uo pipefail

ROOT=${BENCH_ROOT:?}

. "$(dirname "$0")/common.sh"
bench_env

SPAN='span __x64_sys_pread64(pid) -> vfs_read(pid) { hist(latency) }'
BT='fentry:__x64_sys_pread64 { @s[tid] = nsecs; }
fentry:vfs_read /@s[tid]/ { @h = hist((nsecs - @s[tid]) / 1000); delete(@s[tid]); @n = count(); }'

mount_root "$ROOT"
for f in "$FSLAT" "$(readlink -f "$(command -v clang)")" "$ROOT/usr/bin/bpftrace"; do cat "$f" >/dev/null; done
"$FSLAT" -o /dev/null -d 1 -e "$SPAN" >&2 # builds the object into the cache
chroot "$ROOT" bpftrace --version >&2
settle

declare -A PC
percall() { # KEY READY SIGNAL TRACER...
    local key=$1 ready=$2 sig=$3 r
    shift 3
    for r in $(seq "$REPS"); do
        run_case "$key.$r" "$ready" "$sig" --then "$W $N" -- "$@"
    done
    PC[$key]=$(for r in $(seq "$REPS"); do get ns_per_call "$T/$key.$r.h"; done | median)
}
nones() {
    for r in $(seq "$REPS"); do "$W" "$N" >"$T/none.$1.$r.h"; done
    for r in $(seq "$REPS"); do get ns_per_call "$T/none.$1.$r.h"; done | median
}
PC[before]=$(nones before)
percall fslat Tracing TERM "$FSLAT" -e "$SPAN"
percall bpftrace "Attached " INT chroot "$ROOT" bpftrace -e "$BT"
PC[none]=$(nones after)

# What each saw in its last run: fslat's completed spans and histogram total, bpftrace's
# @n and histogram total (each histogram line ends in `COUNT |...|`).
hist_total() { grep -E '^ *\[[^]]*[])] +[0-9]+ \|' "$1" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/ && $(i + 1) ~ /^\|/) s += $i } END { print s + 0 }'; }
fs_log=$T/fslat.$REPS.log
bt_log=$T/bpftrace.$REPS.log
fs_done=$(grep -oE 'completed=[0-9]+' "$fs_log" | cut -d= -f2)
fs_ledger=$(grep -E '^SUMMARY' "$fs_log")
bt_n=$(grep -E '^@n: ' "$bt_log" | awk '{ print $2 }')

ov() { awk -v a="$1" -v z="${PC[none]}" 'BEGIN { printf "%.0f", a - z }'; }
echo "### Spans next to bpftrace (issue 29)"
echo
echo "Kernel $(uname -r), $(chroot "$ROOT" bpftrace --version). \`workload $N\` ($N one-byte"
echo "preads), median of $REPS runs, guest ns per pread under -icount; no tracer:"
echo "$(awk -v x="${PC[none]}" 'BEGIN { printf "%.0f", x }') ns (before the traced runs: $(awk -v x="${PC[before]}" 'BEGIN { printf "%.0f", x }') ns)."
echo
echo "| tracer | script | ns/call | overhead |"
echo "|---|---|---|---|"
echo "| fslat | \`$SPAN\` | $(awk -v x="${PC[fslat]}" 'BEGIN { printf "%.0f", x }') | $(ov "${PC[fslat]}") |"
echo "| bpftrace | \`$(echo "$BT" | tr '\n' ' ')\` | $(awk -v x="${PC[bpftrace]}" 'BEGIN { printf "%.0f", x }') | $(ov "${PC[bpftrace]}") |"
echo
echo "fslat / bpftrace overhead: $(awk -v a="${PC[fslat]}" -v b="${PC[bpftrace]}" -v z="${PC[none]}" 'BEGIN { printf "%.2f", (a - z) / (b - z) }')×."
echo
echo "Counts in the last run: fslat completed $fs_done spans, its histogram holds $(hist_total "$fs_log");"
echo "bpftrace counted $bt_n, its histogram holds $(hist_total "$bt_log"). fslat's ledger: \`$fs_ledger\`."
echo
# Buckets by their lower bound in microseconds: fslat prints `[16us, 32us)`, bpftrace
# (of the latency divided by 1000) `[16, 32)`, `[1]`, `[1K, 2K)` (1K = 1024).
buckets() { grep -E '^ *\[[^]]*[])] +[0-9]+ \|' "$1" | sed -E 's/^ *\[([0-9]+)(us|K|M)?[],)].* ([0-9]+) \|.*/\1 x\2 \3/' |
    awk '{ m = ($2 == "xK") ? 1024 : ($2 == "xM") ? 1048576 : 1; if ($3 > 0) print $1 * m, $3 }'; }
fs_buckets=$(buckets "$fs_log" | tr '\n' ' ')
bt_buckets=$(buckets "$bt_log" | tr '\n' ' ')
if [[ $fs_buckets == "$bt_buckets" ]]; then same=yes; else same=no; fi
echo "Histograms of the last run, as (lower bound in µs, count) of each non-empty bucket:"
echo "fslat \`$fs_buckets\`, bpftrace \`$bt_buckets\`: the same: **$same**. (Each run's"
echo "latencies are its own: a span that took 999 ns in one run can take 1001 in the other.)"
echo
echo "The two histograms as printed (bpftrace's of the latency in microseconds, \`/ 1000\`):"
echo
echo '```'
grep -E '^ *\[[^]]*[])] +[0-9]+ \|' "$fs_log"
echo "--- bpftrace"
grep -E '^ *\[[^]]*[])] +[0-9]+ \|' "$bt_log"
echo '```'
echo
echo "@@FILE spans-fslat.log"
cat "$fs_log"
echo "@@END"
echo "@@FILE spans-bpftrace.log"
cat "$bt_log"
echo "@@END"
