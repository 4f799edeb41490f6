#!/usr/bin/env bash
# Runs inside the guest booted by benches/cgroups. Report (Markdown) on stdout.
set -uo pipefail
W=${BENCH_WORKLOAD:?}
FSLAT=${BENCH_FSLAT:?}
N=${BENCH_N:-20000}
REPS=${BENCH_REPS:-3}
T=/tmp/bench
mkdir -p "$T"
. "$(dirname "$0")/common.sh"
export XDG_CACHE_HOME=$T/cache
# The workload runs in a systemd-like unit's cgroup.
mkdir -p /sys/fs/cgroup/system.slice/bench.service
echo $$ >/sys/fs/cgroup/system.slice/bench.service/cgroup.procs
once() { # CMD...
    "$@" >"$T/out" 2>"$T/err" &
    local pid=$! i
    for i in $(seq 6000); do
        grep -q Tracing "$T/err" && break
        kill -0 "$pid" 2>/dev/null || { log "tracer exited: $(tail -3 "$T/err")"; return; }
        sleep 0.05
    done
    "$W" "$N" | sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p'
    kill -INT "$pid"
    wait "$pid"
    grep -h 'unit=\|cgroup=' "$T/out" | head -2 >&2
}
row() { # LABEL CMD...
    local label=$1
    shift
    once "$@" >/dev/null
    local v
    v=$(for _ in $(seq "$REPS"); do once "$@"; done | median)
    log "$label: $v ns/call"
    echo "| $label | $v |"
}
none=$(for _ in $(seq "$REPS"); do "$W" "$N" | sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p'; done | median)
echo "| vfs_read, N=$N × pread(fd, buf, 1, 0), median of $REPS | guest-ns per call |"
echo "|---|---|"
echo "| no tracer | $none |"
row "fslat \`{ count() by cgroup }\`" "$FSLAT" -e 'session vfs_read { count() by cgroup }'
row "fslat \`{ count() by unit }\`" "$FSLAT" -e 'session vfs_read { count() by unit }'
row "fslat \`{ count() by cgroup_path }\`" "$FSLAT" -e 'session vfs_read { count() by cgroup_path }'
