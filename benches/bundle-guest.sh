#!/usr/bin/env bash
# Issue 28's benchmark, inside the Linux 7.2 guest booted by benches/bundle under -icount:
# time to attach (exec -> the `Tracing` line, guest-ms) of one script three ways, all
# --mode fsession, REPS runs each after an untimed warm-up:
#   - the script, empty object cache (clang runs in the guest);
#   - the script, warm cache (the checked program and object from the cache);
#   - its bundle (built on the host), with no clang reachable and an empty cache.
# Prints a Markdown table on stdout; progress on stderr.
set -uo pipefail

BUNDLE=${BENCH_BUNDLE:?}
SLOW='session vfs_read where latency >= 10s { emit }'

. "$(dirname "$0")/common.sh"
bench_env
REPS=${BENCH_REPS:-5}

for f in "$FSLAT" "$BUNDLE" "$(readlink -f "$(command -v clang)")"; do cat "$f" >/dev/null; done
settle

declare -A A
# NAME EXPORT... -- TRACER...: REPS timed runs (and one untimed before), the median attach.
measure() {
    local key=$1 cold=$2
    shift 2
    local r
    for r in $(seq 0 "$REPS"); do
        local cache=$T/cache.$key
        [[ $cold == cold ]] && cache=$T/cache.$key.$r
        XDG_CACHE_HOME=$cache run_case "$key.$r" Tracing TERM -- "$@"
    done
    A[$key]=$(for r in $(seq "$REPS"); do get attach_ns "$T/$key.$r.h"; done | median)
}

measure cold cold "$FSLAT" --mode fsession -o /dev/null -e "$SLOW"
measure warm warm "$FSLAT" --mode fsession -o /dev/null -e "$SLOW"
# No clang: PATH names nothing, FSLAT_CLANG names a file that is not there (the harness
# and fslat are started by absolute path).
mkdir -p "$T/empty-path"
measure bundle cold env PATH="$T/empty-path" FSLAT_CLANG=/nonexistent/clang "$FSLAT" --mode fsession -o /dev/null "$BUNDLE"
if grep -q 'clang' "$T"/bundle.*.err 2>/dev/null; then
    log "a bundle run mentioned clang:"
    cat "$T"/bundle.*.err >&2
fi

ratio() { awk -v a="$1" -v b="${A[warm]}" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "FAIL" }'; }
echo "| start | guest-ms | × warm |"
echo "|---|---:|---:|"
echo "| script, empty object cache (clang runs in the guest) | $(ms "${A[cold]}") | $(ratio "${A[cold]}") |"
echo "| script, warm cache | $(ms "${A[warm]}") | 1.00 |"
echo "| **bundle, no clang reachable, empty cache** | $(ms "${A[bundle]}") | $(ratio "${A[bundle]}") |"
echo
echo "Median of $REPS runs after an untimed warm-up; \`$SLOW\`; $(uname -r); $("$FSLAT" --version)."
