#!/usr/bin/env bash
# Issue 15's benchmark, inside the Linux 7.2 guest booted by benches/run under -icount
# (run it as `BENCH_GUEST=benches/aggregations.sh BENCH_NO_DOC=1 benches/run`): the
# per-call cost of `percentiles(latency)` next to `hist(latency)` and `count()`, on
# vfs_read (N x pread of one byte), in fsession mode and in the fentry/fexit fallback.
# Prints a Markdown report on stdout; progress on stderr. Environment as benches/guest.sh.
set -uo pipefail

. "$(dirname "$0")/common.sh"
bench_env

for f in "$FSLAT" "$(readlink -f "$(command -v clang)")"; do cat "$f" >/dev/null; done
settle
declare -A PC
percall() { # KEY TRACER...
    local key=$1 r
    shift
    run_case "$key.0" Tracing TERM -- "$@"
    for r in $(seq "$REPS"); do
        run_case "$key.$r" Tracing TERM --then "$W $N" -- "$@"
    done
    PC[$key]=$(for r in $(seq "$REPS"); do get ns_per_call "$T/$key.$r.h"; done | median)
}
nones() { # TAG: the untraced per-call time, median of REPS runs
    for r in $(seq "$REPS"); do "$W" "$N" >"$T/none.$1.$r.h"; cat "$T/none.$1.$r.h" >&2; done
    for r in $(seq "$REPS"); do get ns_per_call "$T/none.$1.$r.h"; done | median
}
PC[none.before]=$(nones before)
SCRIPTS=(
    'session vfs_read { count() }'
    'session vfs_read { hist(latency) }'
    'session vfs_read { percentiles(latency) }'
    'session vfs_read { hist(latency) by comm }'
    'session vfs_read { percentiles(latency) by comm }'
)
for mode in fsession fentry; do
    for i in "${!SCRIPTS[@]}"; do
        percall "$mode.$i" "$FSLAT" --mode "$mode" -o /dev/null -e "${SCRIPTS[$i]}"
    done
done

# The baseline is taken again after the traced runs: shortly after boot the guest can still
# be busy with something else (a first run here measured 3754 ns untraced and then 1725 ns
# traced). The later figure is the one used; both are printed.
PC[none]=$(nones after)

ov() { awk -v a="$1" -v z="${PC[none]}" 'BEGIN { if (a == "") print "FAIL"; else printf "%.0f", a - z }'; }
rel() { awk -v a="$1" -v b="$2" -v z="${PC[none]}" 'BEGIN { if (a == "" || b == "" || b == z) print "–"; else printf "%.2f×", (a - z) / (b - z) }'; }
echo "### percentiles next to hist (issue 15)"
echo
echo "Kernel $(uname -r). Per-call cost on vfs_read, \`workload $N\` (guest ns per one-byte"
echo "pread, median of $REPS runs; no tracer: $(awk -v x="${PC[none]}" 'BEGIN { printf "%.0f", x }') ns after the traced runs, $(awk -v x="${PC[none.before]}" 'BEGIN { printf "%.0f", x }') ns before them). \"vs hist\" is the overhead over the"
echo "same script with \`hist(latency)\` in place of \`percentiles(latency)\`."
echo
echo "| script | mode | ns/call | overhead | vs hist |"
echo "|---|---|---|---|---|"
for mode in fsession fentry; do
    for i in "${!SCRIPTS[@]}"; do
        vs="–"
        case $i in 2) vs=$(rel "${PC[$mode.2]}" "${PC[$mode.1]}") ;; 4) vs=$(rel "${PC[$mode.4]}" "${PC[$mode.3]}") ;; esac
        echo "| \`${SCRIPTS[$i]}\` | $mode | $(awk -v x="${PC[$mode.$i]}" 'BEGIN { printf "%.0f", x }') | $(ov "${PC[$mode.$i]}") | $vs |"
    done
done
