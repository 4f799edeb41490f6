#!/usr/bin/env bash
# Issue 13's benchmark, inside the Linux 7.2 guest booted by benches/run under -icount
# (run it as `BENCH_GUEST=benches/several.sh BENCH_NO_DOC=1 benches/run`): sessions of
# several functions.
#
# - Attach time (exec -> the `Tracing` line, or bpftrace's `Attached` line) for sessions
#   of 1, 10, 100 and 1000 functions: fslat fsession-multi (one program on one link),
#   fslat --mode fsession (one program per function), bpftrace fentry on the same list.
# - Per-call overhead on vfs_read (N x pread): one-function session vs a several-function
#   session that includes vfs_read, both counting by func.
# Prints a Markdown report on stdout; progress on stderr. Environment as benches/guest.sh.
set -uo pipefail

ROOT=${BENCH_ROOT:?}

. "$(dirname "$0")/common.sh"
bench_env

chroot_ready=false
if [[ -x $ROOT/usr/bin/bpftrace ]]; then
    mount -t proc proc "$ROOT/proc" && mount -t sysfs sysfs "$ROOT/sys" &&
        mount -t tracefs tracefs "$ROOT/sys/kernel/tracing" && mount -t bpf bpf "$ROOT/sys/fs/bpf" &&
        mount --rbind /dev "$ROOT/dev" && mount -t tmpfs tmpfs "$ROOT/tmp" && chroot_ready=true
fi
for f in "$FSLAT" "$(readlink -f "$(command -v clang)")"; do cat "$f" >/dev/null; done
$chroot_ready && cat "$ROOT/usr/bin/bpftrace" >/dev/null

# The functions: vfs_read first, then rarely called families, so that attaching is what
# is measured. Names the checker refuses (a struct returned by value, ...) are dropped.
mapfile -t CAND < <(
    echo vfs_read
    for g in 'vfs_*' 'ext4_*' 'jbd2_*' 'xfs_*' 'btrfs_*' 'nfs*' 'tcp_*' 'udp_*' 'ip6_*' 'netlink_*'; do
        "$FSLAT" -l "$g" 2>/dev/null
    done | grep -vx vfs_read | awk '!seen[$0]++'
)
log "${#CAND[@]} candidate functions"
# One check of them all: every name the checker refuses is named in one diagnostic each.
IFS=, eval 'all="${CAND[*]}"'
"$FSLAT" --emit ir -e "session $all" >/dev/null 2>"$T/refused.err"
mapfile -t REFUSED < <(grep -oE '^error: `[A-Za-z0-9_.]+`' "$T/refused.err" | sed 's/^error: `//; s/`$//' | sort -u)
log "${#REFUSED[@]} refused by the checker"
FUNCS=()
for f in "${CAND[@]}"; do
    ((${#FUNCS[@]} >= 1000)) && break
    printf '%s\n' "${REFUSED[@]}" | grep -qx "$f" || FUNCS+=("$f")
done
log "${#FUNCS[@]} usable functions"
list() { local IFS=,; echo "${FUNCS[*]:0:$1}"; }

declare -A A
SIZES=(1 10 100 1000)
for k in "${SIZES[@]}"; do
    ((k > ${#FUNCS[@]})) && continue
    # A one-function session is written as a list of one plus a glob-free twin so that it
    # is a several-function session too: `vfs_read,vfs_read` is vfs_read once.
    script="session $(list "$k"),vfs_read { count() by func }"
    echo "$script" >"$T/s$k.fsl"
    modes=(fsession-multi)
    ((k <= ${PER_FUNCTION_MAX:-100})) && modes+=(fsession)
    for mode in "${modes[@]}"; do
        # First run compiles (and fills the object cache); the timed runs start warm, as a
        # script run again does: attach time is then load + verify + attach.
        XDG_CACHE_HOME=$T/c.$k.$mode run_case "at.$k.$mode.0" Tracing TERM -- "$FSLAT" --mode "$mode" -o /dev/null "$T/s$k.fsl"
        for r in $(seq "$REPS"); do
            XDG_CACHE_HOME=$T/c.$k.$mode run_case "at.$k.$mode.$r" Tracing TERM -- "$FSLAT" --mode "$mode" -o /dev/null "$T/s$k.fsl"
        done
        A[$k.$mode]=$(for r in $(seq "$REPS"); do get attach_ns "$T/at.$k.$mode.$r.h"; done | median)
        A[cold.$k.$mode]=$(get attach_ns "$T/at.$k.$mode.0.h")
    done
    if $chroot_ready && ((k <= ${PER_FUNCTION_MAX:-100})); then
        probes=$(for f in "${FUNCS[@]:0:$k}"; do echo "fentry:$f"; done | paste -sd,)
        echo "$probes { @[probe] = count(); }" >"$ROOT/tmp/b$k.bt"
        run_case "bt.$k" "Attached " INT -- chroot "$ROOT" bpftrace /tmp/b$k.bt
        A[bt.$k]=$(get attach_ns "$T/bt.$k.h")
    fi
done

# ---------------------------------------------------------------- per call
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
for r in $(seq "$REPS"); do "$W" "$N" >"$T/none.$r.h"; done
PC[none]=$(for r in $(seq "$REPS"); do get ns_per_call "$T/none.$r.h"; done | median)
percall one "$FSLAT" -o /dev/null -e 'session vfs_read { count() by func }'
percall multi "$FSLAT" -o /dev/null -e 'session vfs_read, vfs_write, vfs_readv, vfs_writev { count() by func }'
percall multi_fs "$FSLAT" --mode fsession -o /dev/null -e 'session vfs_read, vfs_write, vfs_readv, vfs_writev { count() by func }'
percall one_emit "$FSLAT" -o /dev/null -e 'session vfs_read where latency > 10s { emit }'
percall multi_emit "$FSLAT" -o /dev/null -e 'session vfs_read, vfs_write, vfs_readv, vfs_writev where latency > 10s { emit }'

# ---------------------------------------------------------------- report
ov() { awk -v a="$1" -v z="${PC[none]}" 'BEGIN { if (a == "") print "FAIL"; else printf "%.0f", a - z }'; }
rel() { awk -v a="$1" -v b="$2" -v z="${PC[none]}" 'BEGIN { if (a == "" || b == "" || b == z) print "–"; else printf "%.2f×", (a - z) / (b - z) }'; }
speed() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a + 0 <= 0) print "–"; else printf "%.1f×", b / a }'; }
echo "### Several functions in one session (issue 13)"
echo
echo "Kernel $(uname -r); ${#FUNCS[@]} functions usable for the attach rows (vfs_read, then"
echo "\`vfs_* ext4_* jbd2_* ... tcp_* udp_*\` in \`-l\` order). The script is"
echo "\`session F1,...,Fk,vfs_read { count() by func }\`; attach time is exec → the \`Tracing\`"
echo "line (bpftrace: its \`Attached\` line) in guest ms, median of $REPS runs from a warm object"
echo "cache (the first run, which adds clang, in parentheses). One program per function and
bpftrace are measured up to ${PER_FUNCTION_MAX:-100} functions (beyond, compiling takes many guest minutes)."
echo
echo "| functions | fslat fsession-multi | fslat --mode fsession (one program each) | bpftrace fentry:F1,...,Fk | bpftrace ÷ multi |"
echo "|---|---|---|---|---|"
for k in "${SIZES[@]}"; do
    [[ -n ${A[$k.fsession-multi]:-} ]] || continue
    per=$([[ -n ${A[$k.fsession]:-} ]] && echo "$(ms "${A[$k.fsession]}") ($(ms "${A[cold.$k.fsession]}"))" || echo "not measured")
    bt=$([[ -n ${A[bt.$k]:-} ]] && ms "${A[bt.$k]}" || echo "not measured")
    echo "| $k | $(ms "${A[$k.fsession-multi]}") ($(ms "${A[cold.$k.fsession-multi]}")) | $per | $bt | $(speed "${A[$k.fsession-multi]}" "${A[bt.$k]:-}") |"
done
echo
echo "Per-call cost on vfs_read, \`workload $N\` (guest ns per pread, median of $REPS; no tracer: ${PC[none]} ns):"
echo
echo "| tracer | ns/call | overhead | vs one function |"
echo "|---|---|---|---|"
row() { echo "| $1 | $(awk -v x="${PC[$2]}" 'BEGIN { printf "%.0f", x }') | $(ov "${PC[$2]}") | $(rel "${PC[$2]}" "${PC[$3]}") |"; }
row "\`session vfs_read { count() by func }\` (fsession)" one one
row "\`session vfs_read, vfs_write, vfs_readv, vfs_writev { count() by func }\` (fsession-multi)" multi one
row "the same, \`--mode fsession\` (one program per function)" multi_fs one
row "\`session vfs_read where latency > 10s { emit }\` (fsession)" one_emit one_emit
row "\`session vfs_read, vfs_write, vfs_readv, vfs_writev where latency > 10s { emit }\` (fsession-multi)" multi_emit one_emit
