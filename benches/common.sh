# Shared by the guest benchmark scripts (benches/*.sh): their environment, the bpftrace
# root's mounts, reading the harness's KEY=VALUE figures, starting and stopping a tracer,
# running one traced case, and waiting for the per-call time to settle. Needs $H (harness),
# $W (workload) and $T (scratch dir), which bench_env sets.
log() { echo "bench: $*" >&2; }

# The environment every per-call script shares (BENCH_BIN: the harness and workload;
# BENCH_FSLAT; BENCH_N calls a run; BENCH_REPS runs a row) and its scratch dir, where
# fslat's cache goes too.
bench_env() {
    B=${BENCH_BIN:?}
    FSLAT=${BENCH_FSLAT:?}
    N=${BENCH_N:-20000}
    REPS=${BENCH_REPS:-3}
    W="$B/workload"
    H="$B/harness"
    T=/tmp/bench
    mkdir -p "$T"
    export XDG_CACHE_HOME=$T/cache
}

# The debootstrap root bpftrace runs in (chroot "$ROOT" bpftrace ...), its file systems
# mounted.
mount_root() { # ROOT
    mount -t proc proc "$1/proc" && mount -t sysfs sysfs "$1/sys" &&
        mount -t tracefs tracefs "$1/sys/kernel/tracing" && mount -t bpf bpf "$1/sys/fs/bpf" &&
        mount --rbind /dev "$1/dev" && mount -t tmpfs tmpfs "$1/tmp" || log "chroot mounts failed"
}
getall() { grep -oE "(^| )$1=-?[0-9.]+" "$2" 2>/dev/null | sed 's/.*=//'; }
get() { getall "$1" "$2" | head -1; }
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "" }'; }
ms() { awk -v x="$1" 'BEGIN { if (x == "" || x < 0) print "FAIL"; else printf "%.0f", x / 1e6 }'; }

run_case() { # NAME READY SIGNAL STEPS... -- TRACER...
    local name=$1 ready=$2 sig=$3
    shift 3
    "$H" --ready "$ready" --signal "$sig" --timeout 900 --log "$T/$name.log" "$@" >"$T/$name.h" 2>>"$T/$name.err"
    echo "[$name] $(tr '\n' ' ' <"$T/$name.h")" >&2
    if [[ $(get attach_ns "$T/$name.h") == -1 || $(get exit "$T/$name.h") != 0 ]]; then
        log "$name failed; its output:"
        tail -n 15 "$T/$name.err" "$T/$name.log" >&2
    fi
}

# Guest clock is instruction count: background boot work (ftrace init kworkers, a few
# seconds) inflates early figures. Wait until three runs in a row agree within 0.3%.
settle() {
    local prev="" stable=0 i v
    for i in $(seq 120); do
        "$W" 5000 >"$T/settle.h" # no pipeline: a second process would share the CPU
        v=$(get ns_per_call "$T/settle.h")
        if [[ -n $prev ]] && awk -v a="$v" -v b="$prev" 'BEGIN { exit !(a < b * 1.003 && a > b * 0.997) }'; then
            stable=$((stable + 1))
        else
            stable=0
        fi
        prev=$v
        echo -n "$v " >&2
        ((stable >= 2)) && { log "settled after $i runs at $v ns/call"; return; }
    done
    log "warning: per-call time did not settle (last $v)"
}

# The figure a loop or the workload prints: its ns per call.
per_call() { sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p'; }

# Start CMD, its output in $T/out and $T/err, and wait for READY on its stderr; its pid in
# $tracer. Fails when the tracer exits first, or says nothing ready in 6000 polls.
start_tracer() { # READY CMD...
    local ready=$1 i
    shift
    "$@" >"$T/out" 2>"$T/err" &
    tracer=$!
    for i in $(seq 6000); do
        grep -q "$ready" "$T/err" && return 0
        kill -0 "$tracer" 2>/dev/null || { log "tracer exited: $(tail -3 "$T/err")"; return 1; }
        sleep 0.01
    done
    log "tracer never said $ready: $(tail -3 "$T/err")"
    return 1
}
stop_tracer() { kill -INT "$tracer"; wait "$tracer"; }

# ONCE ARGS... once untimed (clang, caches), then REPS times: the median of what it prints.
median_of_runs() { # ONCE ARGS...
    "$@" >/dev/null
    for _ in $(seq "$REPS"); do "$@"; done | median
}
