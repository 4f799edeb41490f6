#!/usr/bin/env bash
# Runs inside the Linux 7.x guest booted by benches/stacks (tests/vm/run --icount): the
# per-call cost of a kernel-stack key on vfs_read, for fslat (fsession and fentry) and
# bpftrace, against plain count() and no tracer. Report (Markdown) on stdout.
#
# Environment: BENCH_WORKLOAD (benches/c/workload.c, static), BENCH_FSLAT (release
# binary), BENCH_ROOT (debootstrap root with bpftrace), BENCH_N (preads per run),
# BENCH_REPS (runs per row; the median is reported).
set -uo pipefail
W=${BENCH_WORKLOAD:?}
FSLAT=${BENCH_FSLAT:?}
ROOT=${BENCH_ROOT:?}
N=${BENCH_N:-20000}
REPS=${BENCH_REPS:-3}
T=/tmp/bench
mkdir -p "$T"
. "$(dirname "$0")/common.sh"

mount_root "$ROOT"
export XDG_CACHE_HOME=$T/cache

# One run: start the tracer, wait for its ready line on stderr, time N preads, stop it
# with SIGINT. Prints ns per call.
once() { # READY CMD...
    local ready=$1
    shift
    "$@" >"$T/out" 2>"$T/err" &
    local pid=$! i
    for i in $(seq 6000); do
        grep -q "$ready" "$T/err" && break
        kill -0 "$pid" 2>/dev/null || { log "tracer exited: $(tail -3 "$T/err")"; return; }
        sleep 0.05
    done
    "$W" "$N" | sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p'
    kill -INT "$pid"
    wait "$pid"
    grep -h 'SUMMARY\|stack_lost' "$T/out" | head -2 >&2
}
row() { # LABEL READY CMD...: a warm-up run (compiles, caches), then REPS timed runs
    local label=$1
    shift
    once "$@" >/dev/null
    local v
    v=$(for _ in $(seq "$REPS"); do once "$@"; done | median)
    log "$label: $v ns/call"
    echo "| $label | $v |"
}

# No "none" row: run bare from this script, the workload measured 2413 and then 4931
# guest-ns per call (more than with a tracer attached), so it is not a reference here;
# benches/run's is. The rows below agree within 3% between runs.
echo "| tracer on vfs_read, N=$N × pread(fd, buf, 1, 0), median of $REPS | guest-ns per call |"
echo "|---|---|"
# BENCH_ROWS=ustack: the user-stack rows only (issue 45): a key unwound with CFI from an
# 8192-byte copy (the default) against the kernel's frame-pointer walk and bpftrace's.
if [[ ${BENCH_ROWS:-} == ustack ]]; then
    row "fslat \`{ count() }\`, fsession" Tracing "$FSLAT" --mode fsession -e 'session vfs_read { count() }'
    row "fslat \`{ count() by ustack }\`, fsession, CFI (--ustack-bytes 8192)" Tracing "$FSLAT" --mode fsession -e 'session vfs_read { count() by ustack }'
    row "fslat \`{ count() by ustack }\`, fsession, --ustack-bytes 0" Tracing "$FSLAT" --mode fsession --ustack-bytes 0 -e 'session vfs_read { count() by ustack }'
    row "bpftrace $(chroot "$ROOT" bpftrace --version | awk '{ print $2 }') \`fexit:vfs_read { @[ustack] = count(); }\`" "Attached " chroot "$ROOT" bpftrace -e 'fexit:vfs_read { @[ustack] = count(); }'
    exit 0
fi
row "fslat \`{ count() }\`, fsession" Tracing "$FSLAT" --mode fsession -e 'session vfs_read { count() }'
row "fslat \`{ count() by kstack }\`, fsession" Tracing "$FSLAT" --mode fsession -e 'session vfs_read { count() by kstack }'
row "fslat \`{ count() }\`, fentry" Tracing "$FSLAT" --mode fentry -e 'session vfs_read { count() }'
row "fslat \`{ count() by kstack }\`, fentry" Tracing "$FSLAT" --mode fentry -e 'session vfs_read { count() by kstack }'
row "bpftrace $(chroot "$ROOT" bpftrace --version | awk '{ print $2 }') \`fexit:vfs_read { @[kstack] = count(); }\`" "Attached " chroot "$ROOT" bpftrace -e 'fexit:vfs_read { @[kstack] = count(); }'
row "bpftrace \`fexit:vfs_read { @ = count(); }\`" "Attached " chroot "$ROOT" bpftrace -e 'fexit:vfs_read { @ = count(); }'
