#!/usr/bin/env bash
# Runs inside the Linux 7.x guest booted by benches/run (tests/vm/run --icount): every
# case of the benchmark in one boot, then one report on stdout (Markdown). Progress and
# raw figures go to stderr. Sections between "@@FILE NAME" and "@@END" lines are
# details (program dumps) that benches/run saves under target/bench/results/.
#
# Environment (set by benches/run): BENCH_BIN (workload, harness, loader, *.bpf.o),
# BENCH_FSLAT (the release binary), BENCH_ROOT (debootstrap root with bpftrace, bpftool),
# BENCH_N (preads per measurement, default 20000), BENCH_REPS (runs per row, default 3).
set -uo pipefail

. "$(dirname "$0")/common.sh"
bench_env
ROOT=${BENCH_ROOT:?}
STORM=${BENCH_STORM:-200000}
SLOW='session vfs_read where latency >= 10s { emit }'
ALL='session vfs_read { emit }'
BT_SLOW='fentry:vfs_read { @start[tid] = nsecs; }
fexit:vfs_read /@start[tid]/ {
  $lat = nsecs - @start[tid];
  delete(@start[tid]);
  @calls = count();
  if (retval < 0) { @errors = count(); }
  if ($lat >= 10000000000) {
    @slow = count();
    printf("EVENT comm=%s tgid=%d pid=%d requested=%d result=%d latency_us=%d\n",
           comm, pid, tid, args.count, retval, $lat / 1000);
  }
}
END { clear(@start); }'
# The same without the counters (calls, errors, slow): what VM.md's anchor row measured.
BT_BARE='fentry:vfs_read { @start[tid] = nsecs; }
fexit:vfs_read /@start[tid]/ {
  $lat = nsecs - @start[tid];
  delete(@start[tid]);
  if ($lat >= 10000000000) {
    printf("EVENT comm=%s tgid=%d pid=%d requested=%d result=%d latency_us=%d\n",
           comm, pid, tid, args.count, retval, $lat / 1000);
  }
}
END { clear(@start); }'

# log, get/getall (key=value words of a harness report), median, ms and settle.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "–"; else printf "%.2f", a / b }'; }
fix1() { awk -v x="$1" 'BEGIN { if (x == "") print "FAIL"; else printf "%.0f", x }'; }

# SUMMARY lines in the given files: "ok" when every one satisfies the ledger
# (fslat and the C consumer: matched == events + dropped; the C tools: slow == ...).
ledger() {
    cat "$@" 2>/dev/null | awk '
        /^SUMMARY/ {
            delete v
            for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            want = ("matched" in v) ? v["matched"] : v["slow"]
            n++
            if (want != v["events"] + v["dropped"]) bad = bad " " $0
        }
        END {
            if (!n) print "no summary"
            else if (bad != "") print "BROKEN:" bad
            else print "ok"
        }'
}

# run_case NAME READY SIGNAL OUTFILE STEPS... -- TRACER...: one harness run; its report
# lands in $T/NAME.h, the tracer's stderr/stdout in $T/NAME.log. This one replaces
# common.sh's: it can send the tracer's stdout to OUTFILE, and sets no timeout.
run_case() {
    local name=$1 ready=$2 sig=$3 out=$4
    shift 4
    local extra=()
    [[ -n $out ]] && extra=(--stdout "$out")
    "$H" --ready "$ready" --signal "$sig" --log "$T/$name.log" "${extra[@]}" "$@" >"$T/$name.h" 2>>"$T/$name.err"
    echo "[$name] $(tr '\n' ' ' <"$T/$name.h")" >&2
    if [[ $(get attach_ns "$T/$name.h") == -1 || $(get exit "$T/$name.h") != 0 ]]; then
        log "$name failed; its output:"
        tail -n 15 "$T/$name.err" "$T/$name.log" >&2
    fi
}

# The bpftrace root: the kernel interfaces bpftrace (and bpftool) need, mounted into it.
chroot_ready=false
setup_chroot() {
    [[ -x $ROOT/usr/bin/bpftrace ]] || { log "no bpftrace in $ROOT"; return 1; }
    mount -t proc proc "$ROOT/proc" &&
        mount -t sysfs sysfs "$ROOT/sys" &&
        mount -t tracefs tracefs "$ROOT/sys/kernel/tracing" &&
        mount -t bpf bpf "$ROOT/sys/fs/bpf" &&
        mount --rbind /dev "$ROOT/dev" &&
        mount -t tmpfs tmpfs "$ROOT/tmp" &&
        chroot_ready=true
}

# ---------------------------------------------------------------- start
log "kernel $(uname -r), N=$N, reps=$REPS"
grep -q . /sys/kernel/btf/vmlinux || log "no BTF?"
setup_chroot || log "bpftrace rows will be empty"
export XDG_CACHE_HOME=$T/cache-warm
# Warm the page cache for every binary and library (the host root comes over virtiofs:
# under icount, a guest waiting for the host lets its clock jump to the next timer, so a
# first read costs seconds of guest time. That is a VM artefact, not a start-up cost).
warm_files() { # ROOTDIR BINARY...: read each binary and the libraries it links
    local dir=$1
    shift
    for bin in "$@"; do
        echo "$dir$bin"
        chroot "${dir:-/}" ldd "$bin" 2>/dev/null | awk -v d="$dir" '$3 ~ /^\// { print d $3 } $1 ~ /^\// { print d $1 }'
    done | sort -u | xargs cat >/dev/null 2>&1
}
warm_files "" "$FSLAT" "$(command -v clang)" "$(readlink -f "$(command -v clang)")" "$B/loader"
$chroot_ready && warm_files "$ROOT" /usr/bin/bpftrace /usr/sbin/bpftool
"$FSLAT" --mode fsession --emit obj -o "$T/slow.o" -e "$SLOW" >&2
"$FSLAT" --mode fentry --emit obj -o "$T/slow-fentry.o" -e "$SLOW" >&2
$chroot_ready && chroot "$ROOT" bpftrace --version >&2
settle

# A harness step (run while a tracer is attached): each loaded tracing program's size
# and the calls in its translated code, from bpftool; the dumps go to $T/progs.KEY.*.
# (Debian's bpftool has no disassembler, so `prog dump jited` fails; the JIT size is shown.)
cat >"$T/progs.sh" <<EOS
key=\$1
chroot "$ROOT" bpftool prog show | awk '/^[0-9]+: tracing/ { id = \$1; sub(":", "", id); name = \$4 }
    /xlated/ && id { print id, name, \$2, \$4; id = "" }' | while read -r id name xl jit; do
    chroot "$ROOT" bpftool prog dump xlated id "\$id" >"$T/progs.\$key.\$name.xlated"
    insns=\$(grep -c '^ *[0-9]*: (' "$T/progs.\$key.\$name.xlated")
    calls=\$(grep -o 'call [a-z_0-9#]*' "$T/progs.\$key.\$name.xlated" | sed 's/call //; s/#.*//' | sort | uniq -c | awk '{ printf "%s%s×%s", sep, \$2, \$1; sep = " " }')
    echo "\$name \${xl%B} \${jit%B} \$insns \$calls" >>"$T/progs.\$key"
done
EOS

# ---------------------------------------------------------------- per-call overhead
declare -A PC ATT RSS HWM LEDGER
percall() { # KEY READY SIGNAL TRACER...: REPS runs, one workload each, plus an untimed warm-up
    local key=$1 ready=$2 sig=$3 r
    shift 3
    for r in $(seq 0 "$REPS"); do
        local show=()
        # The untimed warm-up run also records the loaded programs (bpftool).
        ((r == 0)) && $chroot_ready && show=(--then "bash $T/progs.sh $key")
        run_case "$key.$r" "$ready" "$sig" "" --then "$W $N" --rss "${show[@]}" -- "${@//@OUT@/$T/$key.$r.out}"
    done
    PC[$key]=$(for r in $(seq "$REPS"); do getall ns_per_call "$T/$key.$r.h"; done | median)
    ATT[$key]=$(for r in $(seq "$REPS"); do get attach_ns "$T/$key.$r.h"; done | median)
    HWM[$key]=$(for r in $(seq "$REPS"); do get rss_hwm_kb "$T/$key.$r.h"; done | median)
    RSS[$key]=$(for r in $(seq "$REPS"); do get maxrss_kb "$T/$key.$r.h"; done | median)
    local files=()
    for r in $(seq "$REPS"); do files+=("$T/$key.$r.log" "$T/$key.$r.out"); done
    LEDGER[$key]=$(ledger "${files[@]}")
}

# BENCH_ONLY=fallback (benches/run's second boot, on a kernel without fsession): only the
# fentry fallback next to the C fentry/fexit tool, per call, then a short report.
if [[ ${BENCH_ONLY:-} == fallback ]]; then
    for r in $(seq "$REPS"); do "$W" "$N" >"$T/none.$r.h"; cat "$T/none.$r.h" >&2; done
    PC[none]=$(for r in $(seq "$REPS"); do getall ns_per_call "$T/none.$r.h"; done | median)
    log "per-call: fslat --mode fentry"
    percall fsfe Tracing TERM "$FSLAT" --mode fentry -o @OUT@ -e "$SLOW"
    log "per-call: C fentry/fexit tool"
    percall cfe Attached TERM "$B/loader" "$B/fentry_latency.bpf.o" -t 10000000000
    ov() { awk -v a="$1" -v b="${PC[none]}" 'BEGIN { if (a == "") print "FAIL"; else printf "%.0f", a - b }'; }
    r=$(awk -v a="${PC[fsfe]:-}" -v b="${PC[cfe]:-}" -v z="${PC[none]}" \
        'BEGIN { if (a == "" || b == "" || b == z) print "–"; else printf "%.2f×", (a - z) / (b - z) }')
    echo "### The fentry fallback on Linux $(uname -r)"
    echo
    echo "A separate boot (\`-icount\`, as above) of this kernel; the same workload,"
    echo "N = $N, median of $REPS runs after an untimed warm-up run."
    echo
    echo "| tracer on vfs_read | ns/call | overhead | × C fentry/fexit tool | ledger |"
    echo "|---|---:|---:|---:|---|"
    echo "| none | $(fix1 "${PC[none]}") | – | | |"
    echo "| **fslat --mode fentry** (per-task stack in task storage) | $(fix1 "${PC[fsfe]:-}") | $(ov "${PC[fsfe]:-}") | $r | ${LEDGER[fsfe]:-} |"
    echo "| C fentry/fexit + thread-id hash map tool | $(fix1 "${PC[cfe]:-}") | $(ov "${PC[cfe]:-}") | 1.00× | ${LEDGER[cfe]:-} |"
    exit 0
fi

log "per-call: no tracer"
for r in $(seq "$REPS"); do "$W" "$N" >"$T/none.$r.h"; cat "$T/none.$r.h" >&2; done
PC[none]=$(for r in $(seq "$REPS"); do getall ns_per_call "$T/none.$r.h"; done | median)
log "per-call: floor"
percall floor Attached TERM "$B/loader" "$B/floor.bpf.o"
log "per-call: C fsession tool"
percall cfs Attached TERM "$B/loader" "$B/fsession_latency.bpf.o" -t 10000000000
log "per-call: fslat --mode fsession"
percall fsfs Tracing TERM "$FSLAT" --mode fsession -o @OUT@ -e "$SLOW"
log "per-call: fslat --mode fentry"
percall fsfe Tracing TERM "$FSLAT" --mode fentry -o @OUT@ -e "$SLOW"
log "per-call: C fentry/fexit tool"
percall cfe Attached TERM "$B/loader" "$B/fentry_latency.bpf.o" -t 10000000000
if $chroot_ready; then
    log "per-call: bpftrace"
    percall bt "Attached " INT chroot "$ROOT" bpftrace -e "$BT_SLOW"
    log "per-call: bpftrace without counters"
    percall btbare "Attached " INT chroot "$ROOT" bpftrace -e "$BT_BARE"
fi

# ---------------------------------------------------------------- time to attach
log "attach: fslat with an empty object cache"
for r in $(seq 0 "$REPS"); do
    XDG_CACHE_HOME=$T/cold.$r run_case "cold.$r" Tracing TERM "" -- "$FSLAT" --mode fsession -o "$T/cold.$r.out" -e "$SLOW"
done
ATT[cold]=$(for r in $(seq "$REPS"); do get attach_ns "$T/cold.$r.h"; done | median)

# Where a warm start goes: front end (BTF, check, C), object from the cache, and the
# kernel's part (load + attach of the same object by the C loader).
clock() { # prints the guest-ns one run of the command takes
    local t0=$EPOCHREALTIME
    "$@" >/dev/null 2>&1
    local t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f\n", (b - a) * 1e9 }'
}
log "attach: breakdown"
ATT[emit_c]=$(for r in $(seq "$REPS"); do clock "$FSLAT" --mode fsession --emit c -e "$SLOW"; done | median)
ATT[emit_obj]=$(for r in $(seq "$REPS"); do clock "$FSLAT" --mode fsession --emit obj -o "$T/x.o" -e "$SLOW"; done | median)
ATT[version]=$(for r in $(seq "$REPS"); do clock "$FSLAT" --version; done | median)
for r in $(seq 0 "$REPS"); do
    run_case "cobj.$r" Attached TERM "" -- "$B/loader" "$T/slow.o"
done
ATT[cobj]=$(for r in $(seq "$REPS"); do get attach_ns "$T/cobj.$r.h"; done | median)

# ---------------------------------------------------------------- throughput
log "throughput: threshold 0, fslat vs the C consumer of fslat's object"
"$FSLAT" --mode fsession --emit obj -o "$T/all.o" -e "$ALL" >&2
declare -A TP
events_of() { awk '/^SUMMARY/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "events") e += kv[2]; if (kv[1] == "dropped") d += kv[2] } } END { print e + 0, d + 0 }' "$@" 2>/dev/null; }
# Live: the storm and the consumer share the one CPU; the default 256 KiB buffer.
run_case tpl_fslat Tracing TERM "" --then "$W $STORM" --rss -- "$FSLAT" --mode fsession -o "$T/tpl_fslat.out" -e "$ALL"
run_case tpl_c Attached TERM "$T/tpl_c.out" --then "$W $STORM" --rss -- "$B/loader" "$T/all.o"
# Backlog: the consumer is stopped while the storm fills a 64 MiB buffer, then it is
# let go and told to stop: it drains everything and exits. Rate = extra events over
# extra time against a run with an empty backlog (which times detach + exit alone).
# "cl" is the C consumer with a line-buffered stdout: one write(2) per event, as fslat.
big=$((64 * 1024 * 1024))
for r in 0 1; do
    cmd="$W $STORM"
    ((r == 0)) && cmd=true
    run_case "tpd_fslat.$r" Tracing TERM "" --stopped "$cmd" -- "$FSLAT" --mode fsession --buffer-size "$big" -o "$T/tpd_fslat.$r.out" -e "$ALL"
    run_case "tpd_c.$r" Attached TERM "$T/tpd_c.$r.out" --stopped "$cmd" -- "$B/loader" "$T/all.o" -b "$big"
    run_case "tpd_cl.$r" Attached TERM "$T/tpd_cl.$r.out" --stopped "$cmd" -- "$B/loader" "$T/all.o" -b "$big" -l
done
for c in fslat c cl; do
    read -r e0 _ < <(events_of "$T/tpd_$c.0.out")
    read -r e1 d1 < <(events_of "$T/tpd_$c.1.out")
    t0=$(get drain_ns "$T/tpd_$c.0.h")
    t1=$(get drain_ns "$T/tpd_$c.1.h")
    TP[drain_$c]=$(awk -v e="$((e1 - e0))" -v t0="$t0" -v t1="$t1" 'BEGIN { if (t1 > t0) printf "%.0f", e * 1e9 / (t1 - t0) }')
    TP[drain_events_$c]=$e1
    TP[drain_dropped_$c]=$d1
    for k in user sys; do
        a=$(get cpu_${k}_us "$T/tpd_$c.0.h")
        b=$(get cpu_${k}_us "$T/tpd_$c.1.h")
        TP[${k}_$c]=$(awk -v a="$a" -v b="$b" -v e="$((e1 - e0))" 'BEGIN { if (e > 0 && b != "") printf "%.0f", (b - a) * 1000 / e }')
    done
    TP[ledger_$c]=$(ledger "$T/tpd_$c.0.out" "$T/tpd_$c.1.out" "$T/tpl_$c.out")
    [[ $c == cl ]] && continue
    read -r e d < <(events_of "$T/tpl_$c.out")
    TP[live_events_$c]=$e
    TP[live_dropped_$c]=$d
    TP[live_pc_$c]=$(get ns_per_call "$T/tpl_$c.h")
done
HWM[storm]=$(get rss_hwm_kb "$T/tpl_fslat.h")
RSS[storm]=$(get maxrss_kb "$T/tpl_fslat.h")

# ---------------------------------------------------------------- scaling
# Functions every pread of the workload runs through (function_graph of
# __x64_sys_pread64 on this kernel). Not all of them: make_vfsuid, make_vfsgid,
# current_time and fdget return structs, which the kernel cannot attach fexit or fsession
# to; __rcu_read_lock/unlock are deny-listed. That leaves 15, so the 16th session goes on
# vfs_write, which the workload does not call. Then more VFS functions for the attach-time
# scripts. Each session is `session F where latency >= 10s { emit comm, latency }`.
path_funcs="vfs_read rw_verify_area shmem_file_read_iter touch_atime security_file_permission
 apparmor_file_permission aa_file_perm bpf_lsm_file_permission shmem_get_folio_gfp
 filemap_get_entry folio_unlock folio_mark_accessed atime_needs_update
 ktime_get_coarse_real_ts64_mg __x64_sys_pread64"
more_funcs="vfs_write vfs_open vfs_llseek vfs_readv vfs_writev vfs_iter_read vfs_iter_write
 vfs_fsync vfs_fsync_range vfs_getattr vfs_getattr_nosec vfs_statx vfs_fstat vfs_fstatat
 vfs_create vfs_mkdir vfs_mknod vfs_rmdir vfs_link vfs_unlink vfs_rename vfs_symlink
 vfs_readlink vfs_truncate vfs_fallocate vfs_fadvise vfs_setpos vfs_copy_file_range
 vfs_splice_read vfs_statfs vfs_utimes vfs_fchmod vfs_fchown vfs_listxattr vfs_getxattr
 vfs_setxattr vfs_removexattr vfs_tmpfile vfs_get_link vfs_clone_file_range vfs_fileattr_get
 vfs_fileattr_set vfs_dedupe_file_range vfs_test_lock vfs_lock_file"
session_line() { echo "session $1 where latency >= 10s { emit comm, latency }"; }
sed 's/ .*//' /sys/kernel/tracing/available_filter_functions >"$T/aff"
usable() { # those of the functions that ftrace lists and fslat accepts
    for f in "$@"; do
        grep -qx "$f" "$T/aff" && "$FSLAT" --mode fsession --emit c -e "$(session_line "$f")" >/dev/null 2>&1 && echo "$f"
    done
}
mapfile -t PATHF < <(usable $path_funcs)
mapfile -t MOREF < <(usable $more_funcs)
FUNCS=("${PATHF[@]:0:16}" "${MOREF[@]}")
log "path functions: ${#PATHF[@]}"
log "scaling functions (${#PATHF[@]} on the path, ${#FUNCS[@]} in all): ${FUNCS[*]}"
fslat_script() { for f in "${FUNCS[@]:0:$1}"; do session_line "$f"; done; }
bt_script() {
    local i=0
    for f in "${FUNCS[@]:0:$1}"; do
        echo "fentry:$f { @s${i}[tid] = nsecs; }"
        echo "fexit:$f /@s${i}[tid]/ { \$l = nsecs - @s${i}[tid]; delete(@s${i}[tid]);"
        echo "  if (\$l >= 10000000000) { printf(\"%s %d\\n\", comm, \$l); } }"
        i=$((i + 1))
    done
}
declare -A SC
for k in 1 4 16; do
    fslat_script "$k" >"$T/s$k.fsl"
    for mode in fsession fentry; do
        log "scaling: $k sessions, $mode"
        c=$T/scache.$k.$mode
        XDG_CACHE_HOME=$c run_case "sc.$k.$mode.0" Tracing TERM "" -- "$FSLAT" --mode "$mode" -o "$T/sc.$k.$mode.0.out" "$T/s$k.fsl"
        for r in 1 2; do
            XDG_CACHE_HOME=$c run_case "sc.$k.$mode.$r" Tracing TERM "" --then "$W $N" -- "$FSLAT" --mode "$mode" -o "$T/sc.$k.$mode.$r.out" "$T/s$k.fsl"
        done
        SC[pc.$k.$mode]=$(for r in 1 2; do get ns_per_call "$T/sc.$k.$mode.$r.h"; done | median)
        SC[ledger.$k.$mode]=$(ledger "$T"/sc.$k.$mode.*.out)
    done
done
for k in 1 10 50; do
    ((k > ${#FUNCS[@]})) && continue
    fslat_script "$k" >"$T/a$k.fsl"
    log "scaling: attach with $k sessions"
    for r in 1 2; do
        XDG_CACHE_HOME=$T/acache.$k.$r run_case "at.$k.cold.$r" Tracing TERM "" -- "$FSLAT" --mode fsession -o "$T/at.$k.cold.$r.out" "$T/a$k.fsl"
        XDG_CACHE_HOME=$T/acache.$k.$r run_case "at.$k.warm.$r" Tracing TERM "" -- "$FSLAT" --mode fsession -o "$T/at.$k.warm.$r.out" "$T/a$k.fsl"
    done
    SC[cold.$k]=$(for r in 1 2; do get attach_ns "$T/at.$k.cold.$r.h"; done | median)
    SC[warm.$k]=$(for r in 1 2; do get attach_ns "$T/at.$k.warm.$r.h"; done | median)
    SC[ledger.a$k]=$(ledger "$T"/at.$k.*.out)
    if $chroot_ready; then
        bt_script "$k" >"$ROOT/tmp/a$k.bt"
        run_case "bt.a$k" "Attached " INT "" --timeout 900 -- chroot "$ROOT" bpftrace /tmp/a$k.bt
        SC[bt.$k]=$(get attach_ns "$T/bt.a$k.h")
    fi
done

# ---------------------------------------------------------------- report
log "report"
ov() { awk -v a="$1" -v b="${PC[none]}" 'BEGIN { if (a == "") print "FAIL"; else printf "%.0f", a - b }'; }
ovr() { # overhead of $1 over overhead of $2
    awk -v a="$1" -v b="$2" -v z="${PC[none]}" 'BEGIN { if (a == "" || b == "" || b == z) print "–"; else printf "%.2f×", (a - z) / (b - z) }'
}
met() { awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN { if (a !~ /^[0-9.]+$/ || b == "") { print "no figure"; exit }
    ok = (op == "<=") ? a <= b : (op == ">=") ? a >= b : a < b; print ok ? "**met**" : "**missed**" }'; }
row() { # label key
    local k=$2
    echo "| $1 | $(fix1 "${PC[$k]:-}") | $(ov "${PC[$k]:-}") | $(ovr "${PC[$k]:-}" "${PC[cfs]:-}") | $(ovr "${PC[$k]:-}" "${PC[cfe]:-}") | $(ms "${ATT[$k]:-}") | ${LEDGER[$k]:-} |"
}

echo "Kernel $(uname -r) in qemu TCG with \`-icount shift=0,sleep=off -smp 1\`: guest time counts"
echo "instructions (1 ns each), so figures are work, not host load; ratios are what count."
echo "N = $N preads per run; every row is the median of $REPS runs after an untimed warm-up run."
echo
echo "### Per-call overhead on vfs_read"
echo
echo "\`workload N\`: N × \`pread(fd, buf, 1, 0)\` on a tmpfs file; nothing is emitted (threshold 10 s)."
echo "Overhead = ns/call − no tracer; the ratio columns divide overheads. Attach: exec → attached line."
echo
echo "| tracer on vfs_read | ns/call | overhead | × C fsession tool | × C fentry/fexit tool | attach ms | ledger |"
echo "|---|---:|---:|---:|---:|---:|---|"
echo "| none | $(fix1 "${PC[none]}") | – | | | | |"
row "floor: fsession program that returns 0 (C loader)" floor
row "C fsession slow-read tool (the tutorial's)" cfs
row "**fslat --mode fsession**" fsfs
row "**fslat --mode fentry**" fsfe
row "C fentry/fexit + thread-id hash map tool" cfe
if $chroot_ready; then
    LEDGER[bt]="n/a (no drop accounting)"
    LEDGER[btbare]="n/a"
    row "bpftrace $(chroot "$ROOT" bpftrace --version | awk '{ print $2 }') fentry/fexit script, same job (with calls/errors/slow counts)" bt
    row "bpftrace, the same script without the three counts" btbare
fi
echo
echo "Script for fslat: \`$SLOW\`. Ledger: every SUMMARY has matched (C tools: slow) == events + dropped."
echo
echo "### Time to attach"
echo
echo "Exec → the tracer's attached line (fslat \`Tracing\`, bpftrace \`Attached N probes\`, C loader \`Attached\`), guest-ms."
echo
echo "| tracer | ms | × bpftrace |"
echo "|---|---:|---:|"
for k in floor cfs cfe cobj cold fsfs fsfe bt; do
    case $k in
    floor) l="C loader, floor object" ;;
    cfs) l="C loader, tutorial fsession tool" ;;
    cfe) l="C loader, fentry/fexit tool" ;;
    cobj) l="C loader, fslat's object for the same script (kernel load + attach alone)" ;;
    cold) l="**fslat fsession, empty object cache** (clang runs)" ;;
    fsfs) l="**fslat fsession, warm cache**" ;;
    fsfe) l="fslat fentry, warm cache" ;;
    bt) l="bpftrace" ;;
    esac
    [[ $k == bt ]] && ! $chroot_ready && continue
    echo "| $l | $(ms "${ATT[$k]:-}") | $(ratio "${ATT[$k]:-}" "${ATT[bt]:-}") |"
done
echo
echo "Warm start, piece by piece: \`fslat --version\` $(ms "${ATT[version]}") ms; \`--emit c\` (read the"
echo "kernel's BTF, check, generate C) $(ms "${ATT[emit_c]}") ms; \`--emit obj\` from the cache $(ms "${ATT[emit_obj]}") ms;"
echo "the C loader loading and attaching the same object $(ms "${ATT[cobj]}") ms (these three are timed with"
echo "bash's \$EPOCHREALTIME around the command, so they include its fork and exec)."
echo
echo "### Throughput at threshold 0"
echo
echo "Script \`$ALL\` (every vfs_read emits a 56-byte event). fslat writes its text with \`-o\` to a"
echo "tmpfs file; the C consumer (\`loader\` on fslat's own object, \`fslat --emit obj\`) does"
echo "\`ring_buffer__poll\` + \`printf\` of the same fields to a tmpfs file."
echo
echo "- **backlog**: the consumer is SIGSTOPped, $STORM preads fill a 64 MiB ring buffer, then it is"
echo "  continued and sent SIGTERM: it detaches, drains everything, prints the summary and exits."
echo "  Rate = events / (that time − the same with an empty backlog). This is the consumer's speed."
echo "- **live**: $STORM preads while the consumer runs (both on the one CPU), default 256 KiB buffer."
echo "  ns per pread includes the consumer's share of the CPU."
echo
echo "| consumer | backlog: events/s | user ns/event | sys ns/event | backlog events | live: ns per pread | live events | live dropped | ledger |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
for c in fslat c cl; do
    case $c in
    fslat) l="**fslat** (text, \`-o\` file)" ;;
    c) l="C consumer (ring_buffer__poll + printf, stdio buffer)" ;;
    cl) l="C consumer, line-buffered stdout (one write per event, like fslat)" ;;
    esac
    live="$(fix1 "${TP[live_pc_$c]:-}") | ${TP[live_events_$c]:-} | ${TP[live_dropped_$c]:-}"
    [[ $c == cl ]] && live="– | – | –"
    echo "| $l | ${TP[drain_$c]:-FAIL} | ${TP[user_$c]:-} | ${TP[sys_$c]:-} | ${TP[drain_events_$c]:-} | $live | ${TP[ledger_$c]:-} |"
done
echo
echo "CPU per event = the consumer's user and system time (wait4 rusage) over the backlog run,"
echo "minus the empty run's, divided by the events."
echo
echo "### Memory"
echo
echo "fslat's VmHWM while tracing: $(fix1 "${HWM[fsfs]:-}") KiB (slow-read script, idle), $(fix1 "${HWM[storm]:-}") KiB"
echo "(threshold 0 under the storm); its ru_maxrss at exit after the storm: ${RSS[storm]:-?} KiB. For scale: the C"
echo "loader ${HWM[cfs]:-?} KiB, bpftrace ${HWM[bt]:-?} KiB."
echo
echo "### Targets (issue 8)"
echo
fs_r=$(ovr "${PC[fsfs]:-}" "${PC[cfs]:-}" | tr -d '×')
fe_r=$(ovr "${PC[fsfe]:-}" "${PC[cfe]:-}" | tr -d '×')
cold_r=$(ratio "${ATT[cold]:-}" "${ATT[bt]:-}")
warm_r=$(ratio "${ATT[fsfs]:-}" "${ATT[bt]:-}")
tp_r=$(ratio "${TP[drain_fslat]:-}" "${TP[drain_c]:-}")
hwm_max=$(printf '%s\n' "${HWM[fsfs]:-0}" "${HWM[storm]:-0}" "${RSS[storm]:-0}" | sort -n | tail -1)
all_ledgers="${LEDGER[floor]} ${LEDGER[cfs]} ${LEDGER[fsfs]} ${LEDGER[fsfe]} ${LEDGER[cfe]} ${TP[ledger_fslat]} ${TP[ledger_c]} ${TP[ledger_cl]}"
for k in 1 4 16; do all_ledgers+=" ${SC[ledger.$k.fsession]:-} ${SC[ledger.$k.fentry]:-}"; done
for k in 1 10 50; do all_ledgers+=" ${SC[ledger.a$k]:-}"; done
echo "| target | measured | |"
echo "|---|---|---|"
echo "| fsession overhead ≤ 1.05× the C fsession tool's | ${fs_r}× | $(met "$fs_r" "<=" 1.05) |"
echo "| fentry overhead ≤ 1.05× the C fentry/fexit tool's | ${fe_r}× | $(met "$fe_r" "<=" 1.05) |"
echo "| fentry overhead below bpftrace's | $(ov "${PC[fsfe]:-}") vs $(ov "${PC[bt]:-}") ns | $(met "${PC[fsfe]:-}" "<" "${PC[bt]:-}") |"
echo "| attach, empty cache ≤ 0.3× bpftrace | ${cold_r}× ($(ms "${ATT[cold]:-}") vs $(ms "${ATT[bt]:-}") ms) | $(met "$cold_r" "<=" 0.3) |"
echo "| attach, warm cache ≤ 0.06× bpftrace | ${warm_r}× ($(ms "${ATT[fsfs]:-}") vs $(ms "${ATT[bt]:-}") ms) | $(met "$warm_r" "<=" 0.06) |"
echo "| throughput ≥ 0.9× the C consumer | ${tp_r}× (${TP[drain_fslat]:-?} vs ${TP[drain_c]:-?} events/s) | $(met "$tp_r" ">=" 0.9) |"
echo "| peak RSS ≤ 20 MB | $((hwm_max / 1024)) MiB ($hwm_max KiB) | $(met "$hwm_max" "<=" 20480) |"
if [[ $all_ledgers == *BROKEN* || $all_ledgers == *"no summary"* ]]; then
    echo "| ledger exact in every run | $all_ledgers | **missed** |"
else
    echo "| ledger exact in every run | all ok | **met** |"
fi
echo
echo "### Scaling"
echo
echo "Overhead with k sessions on k different functions"
echo "that every pread runs through: ${PATHF[*]:0:16} (for 16 sessions the last is vfs_write,"
echo "which the workload does not call: the other functions on the path return structs, which fexit"
echo "and fsession cannot attach to, or are deny-listed). Median of 2 runs; each session is"
echo "\`session F where latency >= 10s { emit comm, latency }\`."
echo
echo "| sessions | fsession ns/call | overhead | per session | fentry ns/call | overhead | per session | ledger |"
echo "|---:|---:|---:|---:|---:|---:|---:|---|"
per() { awk -v a="$1" -v z="${PC[none]}" -v k="$2" 'BEGIN { if (a == "") print "FAIL"; else printf "%.0f", (a - z) / k }'; }
for k in 1 4 16; do
    a=${SC[pc.$k.fsession]:-}
    b=${SC[pc.$k.fentry]:-}
    echo "| $k | $(fix1 "$a") | $(ov "$a") | $(per "$a" "$k") | $(fix1 "$b") | $(ov "$b") | $(per "$b" "$k") | ${SC[ledger.$k.fsession]:-} / ${SC[ledger.$k.fentry]:-} |"
done
echo
echo "Time to attach a script of k sessions on k different functions (the path functions above, then"
echo "other \`vfs_*\` functions), fsession mode, guest-ms, median of 2; bpftrace runs the same"
echo "fentry/fexit pairs (2k probes), once."
echo
echo "| sessions | fslat, empty cache | fslat, warm cache | bpftrace | warm × bpftrace | ms per extra session (warm) |"
echo "|---:|---:|---:|---:|---:|---:|"
for k in 1 10 50; do
    inc=$(awk -v a="${SC[warm.$k]:-}" -v b="${SC[warm.1]:-}" -v k="$k" 'BEGIN { if (k > 1 && a != "" && b != "") printf "%.1f", (a - b) / (k - 1) / 1e6; else print "–" }')
    echo "| $k | $(ms "${SC[cold.$k]:-}") | $(ms "${SC[warm.$k]:-}") | $(ms "${SC[bt.$k]:-}") | $(ratio "${SC[warm.$k]:-}" "${SC[bt.$k]:-}") | $inc |"
done
if $chroot_ready; then
    echo
    echo "### The programs (bpftool, from the warm-up runs)"
    echo
    echo "Sizes of every loaded tracing program, and the calls (helpers, kfuncs) in its translated code."
    echo "Full xlated dumps: \`target/bench/results/progs.*.xlated\`."
    echo
    echo "| tracer | program | xlated B | jited B | insns | calls |"
    echo "|---|---|---:|---:|---:|---|"
    for k in floor cfs fsfs fsfe cfe bt btbare; do
        [[ -f $T/progs.$k ]] || continue
        case $k in
        floor) l="floor (C)" ;; cfs) l="C fsession tool" ;; fsfs) l="fslat fsession" ;;
        fsfe) l="fslat fentry" ;; cfe) l="C fentry/fexit tool" ;; bt) l="bpftrace" ;;
        btbare) l="bpftrace, no counts" ;;
        esac
        while read -r name xl jit insns calls; do
            echo "| $l | $name | $xl | $jit | $insns | $calls |"
        done <"$T/progs.$k"
    done
    for f in "$T"/progs.*.*.xlated "$T"/progs.*.*.jited; do
        [[ -f $f ]] || continue
        echo "@@FILE ${f##*/}"
        cat "$f"
        echo "@@END"
    done
fi
echo "@@FILE raw.txt"
for f in "$T"/*.h; do echo "== ${f##*/}"; cat "$f"; done
echo "@@END"
echo "@@FILE scripts.txt"
for f in "$T"/s16.fsl "$T"/a50.fsl; do echo "== ${f##*/}"; cat "$f"; done
[[ -f $ROOT/tmp/a50.bt ]] && { echo "== a50.bt"; cat "$ROOT/tmp/a50.bt"; }
echo "@@END"
