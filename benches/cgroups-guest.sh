#!/usr/bin/env bash
# Runs inside the guest booted by benches/cgroups. Report (Markdown) on stdout.
set -uo pipefail
. "$(dirname "$0")/common.sh"
bench_env
# The workload runs in a systemd-like unit's cgroup.
mkdir -p /sys/fs/cgroup/system.slice/bench.service
echo $$ >/sys/fs/cgroup/system.slice/bench.service/cgroup.procs
once() { # CMD...
    start_tracer Tracing "$@" || return
    "$W" "$N" | per_call
    stop_tracer
    grep -h 'unit=\|cgroup=' "$T/out" | head -2 >&2
}
row() { # LABEL CMD...
    local label=$1
    shift
    local v
    v=$(median_of_runs once "$@")
    log "$label: $v ns/call"
    echo "| $label | $v |"
}
none=$(for _ in $(seq "$REPS"); do "$W" "$N" | per_call; done | median)
echo "| vfs_read, N=$N × pread(fd, buf, 1, 0), median of $REPS | guest-ns per call |"
echo "|---|---|"
echo "| no tracer | $none |"
row "fslat \`{ count() by cgroup }\`" "$FSLAT" -e 'session vfs_read { count() by cgroup }'
row "fslat \`{ count() by unit }\`" "$FSLAT" -e 'session vfs_read { count() by unit }'
row "fslat \`{ count() by cgroup_path }\`" "$FSLAT" -e 'session vfs_read { count() by cgroup_path }'
