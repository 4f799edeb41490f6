#!/usr/bin/env bash
# Runs inside the Linux 7.x guest booted by benches/stacks (tests/vm/run --icount): the
# per-call cost of a kernel-stack key on vfs_read, for fslat (fsession and fentry) and
# bpftrace, against plain count() and no tracer. Report (Markdown) on stdout.
#
# Environment: BENCH_BIN (the static workload of benches/c/workload.c), BENCH_FSLAT (release
# binary), BENCH_ROOT (debootstrap root with bpftrace), BENCH_N (preads per run),
# BENCH_REPS (runs per row; the median is reported).
set -uo pipefail
ROOT=${BENCH_ROOT:?}
. "$(dirname "$0")/common.sh"
bench_env
mount_root "$ROOT"

# One run: start the tracer, wait for its ready line on stderr, time N preads, stop it
# with SIGINT. Prints ns per call.
once() { # READY CMD...
    start_tracer "$@" || return
    "$W" "$N" | per_call
    stop_tracer
    grep -h 'SUMMARY\|stack_lost' "$T/out" | head -2 >&2
    grep -h 'main;pread' "$T/out" >&2
}
# One run of a tracer given `-p PID` (PID in CMD is replaced): the workload is started
# first and held on a fifo until the tracer is ready, so the tracer's own calls (fslat
# reads /proc/PID/maps and ELF files while the workload runs) return at the program's
# first test. Also prints how many calls the workload's stack counted (of N + 1000).
once_pid() { # READY CMD...
    local ready=$1 wpid
    shift
    rm -f "$T/go"
    mkfifo "$T/go"
    sh -c 'read x <"$1"; exec "$2" "$3"' sh "$T/go" "$W" "$N" >"$T/w" &
    wpid=$!
    start_tracer "$ready" "${@//PID/$wpid}" || { echo >"$T/go"; wait "$wpid"; return; }
    echo >"$T/go"
    wait "$wpid"
    per_call <"$T/w"
    kill -INT "$tracer" 2>/dev/null
    wait "$tracer"
    grep -h 'SUMMARY\|stack_lost' "$T/out" | head -2 >&2
    grep -h 'main;pread' "$T/out" >&2
}
row() { # LABEL READY CMD...: a warm-up run (compiles, caches), then REPS timed runs
    local label=$1
    shift
    local v
    v=$(median_of_runs "${ONCE:-once}" "$@")
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
# BENCH_ROWS=ustack-pid: the rows with -p only (with the walk in the kernel, --ustack-walk).
if [[ ${BENCH_ROWS:-} == ustack* ]]; then
    [[ $BENCH_ROWS == ustack-pid ]] || {
        row "fslat \`{ count() }\`, fsession" Tracing "$FSLAT" --mode fsession -e 'session vfs_read { count() }'
        row "fslat \`{ count() by ustack }\`, fsession, CFI (--ustack-bytes 8192)" Tracing "$FSLAT" --mode fsession -e 'session vfs_read { count() by ustack }'
        row "fslat \`{ count() by ustack }\`, fsession, --ustack-bytes 0" Tracing "$FSLAT" --mode fsession --ustack-bytes 0 -e 'session vfs_read { count() by ustack }'
        row "bpftrace $(chroot "$ROOT" bpftrace --version | awk '{ print $2 }') \`fexit:vfs_read { @[ustack] = count(); }\`" "Attached " chroot "$ROOT" bpftrace -e 'fexit:vfs_read { @[ustack] = count(); }'
    }
    # The same, each tracer told the workload's pid: its own reads cost a compare.
    ONCE=once_pid row "fslat -p \`{ count() }\`, fsession" Tracing "$FSLAT" -p PID --mode fsession -e 'session vfs_read { count() }'
    ONCE=once_pid row "fslat -p \`{ count() by ustack }\`, fsession, CFI (--ustack-bytes 8192)" Tracing "$FSLAT" -p PID --mode fsession -e 'session vfs_read { count() by ustack }'
    ONCE=once_pid row "fslat -p \`{ count() by ustack }\`, fsession, --ustack-walk (CFI tables in the kernel)" Tracing "$FSLAT" -p PID --mode fsession --ustack-walk -e 'session vfs_read { count() by ustack }'
    ONCE=once_pid row "fslat -p \`{ count() by ustack }\`, fsession, --ustack-bytes 0" Tracing "$FSLAT" -p PID --mode fsession --ustack-bytes 0 -e 'session vfs_read { count() by ustack }'
    ONCE=once_pid row "bpftrace -p \`fexit:vfs_read /pid == PID/ { @[ustack] = count(); }\`" "Attached " chroot "$ROOT" bpftrace -e 'fexit:vfs_read /pid == PID/ { @[ustack] = count(); }'
    exit 0
fi
row "fslat \`{ count() }\`, fsession" Tracing "$FSLAT" --mode fsession -e 'session vfs_read { count() }'
row "fslat \`{ count() by kstack }\`, fsession" Tracing "$FSLAT" --mode fsession -e 'session vfs_read { count() by kstack }'
row "fslat \`{ count() }\`, fentry" Tracing "$FSLAT" --mode fentry -e 'session vfs_read { count() }'
row "fslat \`{ count() by kstack }\`, fentry" Tracing "$FSLAT" --mode fentry -e 'session vfs_read { count() by kstack }'
row "bpftrace $(chroot "$ROOT" bpftrace --version | awk '{ print $2 }') \`fexit:vfs_read { @[kstack] = count(); }\`" "Attached " chroot "$ROOT" bpftrace -e 'fexit:vfs_read { @[kstack] = count(); }'
row "bpftrace \`fexit:vfs_read { @ = count(); }\`" "Attached " chroot "$ROOT" bpftrace -e 'fexit:vfs_read { @ = count(); }'
