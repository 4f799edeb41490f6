#!/usr/bin/env bash
# Issue 26's script-shape matrix, inside a guest booted by benches/run under -icount: for
# each common script shape, the per-call overhead of fslat (in each mode of BENCH_MODES)
# next to bpftrace's same script and, for the slow-read row, the hand-written C tools, all
# in one boot. Then the cold and warm start of fslat. Prints a Markdown table on stdout;
# progress on stderr. Environment as benches/guest.sh, plus BENCH_MODES (fslat's --mode
# words, default "fsession fsession-multi"), BENCH_ROWS (a space-separated subset of the
# row keys below, default all) and BENCH_BASE (a second fslat binary, e.g. main's build, run
# in the same modes next to BENCH_FSLAT: before and after in one boot).
set -uo pipefail

ROOT=${BENCH_ROOT:?}
MODES=${BENCH_MODES:-fsession fsession-multi}
BASE=${BENCH_BASE:-}

. "$(dirname "$0")/common.sh"
bench_env

# The rows: KEY, fslat's script, bpftrace's script for the same job ("" when bpftrace has
# no such aggregation), and a note. The workload preads one byte of a tmpfs file N times
# (vfs_read, count = 1, ret = 1); nothing in it fails and nothing is slower than 10 s, so
# the filtered rows measure the filter.
FOUR='vfs_read, vfs_write, vfs_readv, vfs_writev'
BT_PAIR='fentry:vfs_read { @start[tid] = nsecs; }
fexit:vfs_read /@start[tid]/ { $l = nsecs - @start[tid]; delete(@start[tid]); '
ROWS=(
    count "session vfs_read { count() }"
    'fexit:vfs_read { @ = count(); }' ''
    count_comm "session vfs_read { count() by comm }"
    'fexit:vfs_read { @[comm] = count(); }' ''
    count_func "session $FOUR { count() by func }"
    'fexit:vfs_read,fexit:vfs_write,fexit:vfs_readv,fexit:vfs_writev { @[probe] = count(); }' 'four functions; the workload calls vfs_read'
    sum_comm "session vfs_read { sum(count) by comm }"
    'fentry:vfs_read { @[comm] = sum(args.count); }' ''
    ret_lt0 "session vfs_read where ret < 0 { count() }"
    'fexit:vfs_read /retval < 0/ { @ = count(); }' 'no call fails'
    hist "session vfs_read { hist(latency) }"
    "$BT_PAIR"'@ = hist($l); }' ''
    hist_comm "session vfs_read { hist(latency) by comm }"
    "$BT_PAIR"'@[comm] = hist($l); }' ''
    lhist "session vfs_read { lhist(latency, 0us, 100us, 10us) }"
    "$BT_PAIR"'@ = lhist($l, 0, 100000, 10000); }' ''
    percentiles "session vfs_read { percentiles(latency) }"
    "$BT_PAIR"'@ = hist($l); }' 'bpftrace has no percentiles: its hist'
    slow "session vfs_read where latency > 10s { emit }"
    "$BT_PAIR"'if ($l > 10000000000) { printf("%s %d %d %d %d\n", comm, pid, args.count, retval, $l); } }' 'nothing is emitted'
    kstack "session vfs_read { count() by kstack }"
    'fexit:vfs_read { @[kstack] = count(); }' ''
    emit_all "session vfs_read { emit }"
    "$BT_PAIR"'printf("%s %d %d %d %d %d\n", comm, pid, tid, args.count, retval, $l); }' 'every call printed, to a file'
    # What the kernel's kprobe paths cost, for the default mode's analysis (issue 42):
    # bpftrace alone ("" for fslat), attached through kprobe_multi links (a wildcard; the
    # workload calls only vfs_read of the functions it matches).
    bt_kentry "" 'kprobe:vfs_read* { @ = count(); }' 'bpftrace only: kprobe_multi at entry'
    bt_kreturn "" 'kretprobe:vfs_read* { @ = count(); }' 'bpftrace only: kretprobe_multi'
    bt_ksession "" 'kprobe:vfs_read* { @s[tid] = nsecs; } kretprobe:vfs_read* { @ = count(); }' 'bpftrace only: kprobe and kretprobe, merged into one kprobe session'
    bt_kentry_comm "" 'kprobe:vfs_read* { @[comm] = count(); }' 'bpftrace only: count() by comm, kprobe_multi at entry'
    bt_kreturn_lt0 "" 'kretprobe:vfs_read* /retval < 0/ { @ = count(); }' 'bpftrace only: the ret < 0 filter, kretprobe_multi'
    # The same maps at entry instead of return on a trampoline (what an entry-only
    # program would save where fentry is the default).
    bt_fentry "" 'fentry:vfs_read { @ = count(); }' 'bpftrace only: count() at fentry'
    bt_fentry_comm "" 'fentry:vfs_read { @[comm] = count(); }' 'bpftrace only: count() by comm at fentry'
)
bt_of() { # KEY: bpftrace's script of row KEY
    local i
    for ((i = 0; i < ${#ROWS[@]}; i += 4)); do [[ ${ROWS[i]} == "$1" ]] && echo "${ROWS[i + 2]}"; done
}
# The exact floors (issue 42): for a row, the shortest hand-written program on a kprobe
# path of Linux 7.2 (exact: its handler runs with preemption off), benches/c/kfloor.bpf.c,
# loaded by kloader. KEY, the program, the row it is the floor of.
FLOORS=(
    c_kcount c_kcount count
    c_kcomm c_kcomm count_comm
    c_ksum c_ksum sum_comm
    c_kret_lt0 c_kret_lt0 ret_lt0
    c_ksession_slow c_ksession_slow slow
)
# The bt_* and c_* rows only when BENCH_ROWS names them.
want_row() {
    if [[ $1 == bt_* || $1 == c_* ]]; then [[ " ${BENCH_ROWS:-} " == *" $1 "* ]]; else [[ -z ${BENCH_ROWS:-} || " $BENCH_ROWS " == *" $1 "* ]]; fi
}

chroot_ready=false
if [[ -x $ROOT/usr/bin/bpftrace ]] && mount_root "$ROOT"; then chroot_ready=true; fi
for f in "$FSLAT" "$(readlink -f "$(command -v clang)")"; do cat "$f" >/dev/null; done
$chroot_ready && cat "$ROOT/usr/bin/bpftrace" >/dev/null
log "kernel $(uname -r), N=$N, reps=$REPS, modes: $MODES"
settle

declare -A PC ATT
percall() { # KEY READY SIGNAL OUT TRACER...: an untimed warm-up run, then REPS timed ones
    local key=$1 ready=$2 sig=$3 out=$4 r
    shift 4
    for r in $(seq 0 "$REPS"); do
        local then=(--then "$W $N")
        ((r == 0)) && then=()
        local o=("$@")
        [[ -n $out ]] && o=("${@//@OUT@/$T/$key.$r.out}")
        run_case "$key.$r" "$ready" "$sig" "${then[@]}" -- "${o[@]}"
    done
    PC[$key]=$(for r in $(seq "$REPS"); do get ns_per_call "$T/$key.$r.h"; done | median)
    ATT[$key]=$(for r in $(seq "$REPS"); do get attach_ns "$T/$key.$r.h"; done | median)
}
# No tracer: one run before each row and one at the end, the median of them all (a
# single early measurement can still carry the boot's background work).
nones=0
none() {
    nones=$((nones + 1))
    "$W" "$N" >"$T/none.$nones.h"
}

for ((i = 0; i < ${#ROWS[@]}; i += 4)); do
    key=${ROWS[i]} script=${ROWS[i + 1]} bt=${ROWS[i + 2]}
    want_row "$key" || continue
    none
    for mode in $MODES; do
        [[ -n $script ]] || continue
        log "$key: fslat --mode $mode"
        percall "$key.$mode" Tracing TERM out "$FSLAT" --mode "$mode" -o @OUT@ -e "$script"
        if [[ -n $BASE ]]; then
            log "$key: base fslat --mode $mode"
            percall "$key.$mode.base" Tracing TERM out "$BASE" --mode "$mode" -o @OUT@ -e "$script"
        fi
    done
    if $chroot_ready && [[ -n $bt ]]; then
        log "$key: bpftrace"
        percall "$key.bt" "Attached " INT "" chroot "$ROOT" bpftrace -e "$bt"
    fi
done
if want_row slow; then
    log "slow: C tools"
    percall slow.cfs Attached TERM "" "$B/loader" "$B/fsession_latency.bpf.o" -t 10000000000
    percall slow.cfe Attached TERM "" "$B/loader" "$B/fentry_latency.bpf.o" -t 10000000000
fi

for ((i = 0; i < ${#FLOORS[@]}; i += 3)); do
    key=${FLOORS[i]}
    want_row "$key" || continue
    none
    log "$key: the exact floor (kloader ${FLOORS[i + 1]})"
    percall "$key" Attached INT "" "$B/kloader" "$B/kfloor.bpf.o" "${FLOORS[i + 1]}"
done

none
PC[none]=$(for r in $(seq "$nones"); do get ns_per_call "$T/none.$r.h"; done | median)
log "no tracer: ${PC[none]} ns/call (median of $nones runs)"

# Cold start: exec -> Tracing with an empty object cache (clang runs), and warm (the object
# comes from the cache), for the slow-read script in each mode.
for mode in $MODES; do
    want_row start || break
    for r in $(seq 0 "$REPS"); do
        XDG_CACHE_HOME=$T/cold.$mode.$r run_case "cold.$mode.$r" Tracing TERM -- "$FSLAT" --mode "$mode" -o /dev/null -e 'session vfs_read where latency >= 10s { emit }'
        XDG_CACHE_HOME=$T/cold.$mode.$r run_case "warm.$mode.$r" Tracing TERM -- "$FSLAT" --mode "$mode" -o /dev/null -e 'session vfs_read where latency >= 10s { emit }'
    done
    ATT[cold.$mode]=$(for r in $(seq "$REPS"); do get attach_ns "$T/cold.$mode.$r.h"; done | median)
    ATT[warm.$mode]=$(for r in $(seq "$REPS"); do get attach_ns "$T/warm.$mode.$r.h"; done | median)
done

# ---------------------------------------------------------------- report
ov() { awk -v a="${PC[$1]:-}" -v z="${PC[none]}" 'BEGIN { if (a == "") print ""; else printf "%.0f", a - z }'; }
rat() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 <= 0) print "–"; else printf "%.2f×", a / b }'; }
echo "### Script shapes on Linux $(uname -r)"
echo
echo "One boot (\`-icount\`); the workload: N = $N × \`pread(fd, buf, 1, 0)\` of a tmpfs file;"
echo "overhead = guest-ns per call − no tracer (${PC[none]}, the median of $nones runs between the rows);
median of $REPS runs after an untimed"
echo "warm-up run. The ratio divides fslat's overhead by bpftrace 0.27's for the same job"
echo "(target: at most 0.90×)."
echo
head="| script | bpftrace overhead |"
sep="|---|---:|"
for mode in $MODES; do
    [[ -n $BASE ]] && head+=" base fslat $mode | × bpftrace |" && sep+="---:|---:|"
    head+=" fslat $mode | × bpftrace |"
    sep+="---:|---:|"
done
echo "$head"
echo "$sep"
for ((i = 0; i < ${#ROWS[@]}; i += 4)); do
    key=${ROWS[i]} script=${ROWS[i + 1]} note=${ROWS[i + 3]}
    want_row "$key" || continue
    b=$(ov "$key.bt")
    line="| \`${script:-$(bt_of "$key")}\`${note:+ ($note)} | ${b:-–} |"
    for mode in $MODES; do
        [[ -n $BASE ]] && { [[ -n $script ]] || line+=" – | – |"; }
        [[ -n $script ]] || { line+=" – | – |"; continue; }
        if [[ -n $BASE ]]; then
            f=$(ov "$key.$mode.base")
            line+=" ${f:-FAIL} | $(rat "$f" "$b") |"
        fi
        f=$(ov "$key.$mode")
        line+=" ${f:-FAIL} | $(rat "$f" "$b") |"
    done
    echo "$line"
done
if want_row slow; then
    echo
    echo "The slow-read row against the hand-written C tools (guest-ns overhead per call):"
    echo "C fsession tool $(ov slow.cfs), C fentry/fexit tool $(ov slow.cfe);"
    for mode in $MODES; do
        echo "fslat $mode $(ov "slow.$mode") ($(rat "$(ov "slow.$mode")" "$(ov slow.cfs)") the C fsession tool, $(rat "$(ov "slow.$mode")" "$(ov slow.cfe)") the C fentry/fexit tool)."
    done
fi
floors=""
for ((i = 0; i < ${#FLOORS[@]}; i += 3)); do
    want_row "${FLOORS[i]}" && floors+="| \`${FLOORS[i + 1]}\` | ${FLOORS[i + 2]} | $(ov "${FLOORS[i]}") |"$'\n'
done
if [[ -n $floors ]]; then
    echo
    echo "The exact floors (benches/c/kfloor.bpf.c: the shortest program on a kprobe path, guest-ns overhead per call):"
    echo
    echo "| program | floor of row | overhead |"
    echo "|---|---|---:|"
    printf '%s' "$floors"
fi
if want_row start; then
    echo
    echo "| start (slow-read script, exec → \`Tracing\`, guest-ms) | cold: empty object cache | warm |"
    echo "|---|---:|---:|"
    for mode in $MODES; do
        echo "| fslat --mode $mode | $(ms "${ATT[cold.$mode]:-}") | $(ms "${ATT[warm.$mode]:-}") |"
    done
    [[ -n ${ATT[slow.bt]:-} ]] && echo "| bpftrace (slow-read script) | $(ms "${ATT[slow.bt]}") | |"
fi
