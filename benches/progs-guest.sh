#!/usr/bin/env bash
# The programs fslat loads for some scripts, as the kernel holds them: for each FSLAT
# binary (space-separated in PROGS_FSLAT) and each script (one per line in PROGS_SCRIPTS),
# start fslat with no --mode, dump every loaded program's xlated instructions with the
# bpftool of the bpftrace root (BENCH_ROOT, benches/run builds it) into PROGS_OUT (default:
# the --share directory), and print one line per program: binary, script, program type and name, instructions,
# helper calls. Issue 42's analysis of the default mode's instructions; run in a guest:
#   tests/vm/run -n --share DIR -- env BENCH_ROOT=$PWD/target/bench/bpftrace-root PROGS_FSLAT=... \
#       PROGS_SCRIPTS=... bash benches/progs-guest.sh
set -uo pipefail
ROOT=${BENCH_ROOT:?}
OUT=${PROGS_OUT:-/run/fslat-share}
mkdir -p "$OUT"
. "$(dirname "$0")/common.sh"
mount_root "$ROOT"
export XDG_CACHE_HOME=/tmp/progs-cache
b=0
for f in $PROGS_FSLAT; do
    b=$((b + 1))
    s=0
    while IFS= read -r script; do
        [[ -n $script ]] || continue
        s=$((s + 1))
        "$f" -o /dev/null -e "$script" >/dev/null 2>"/tmp/progs.$b.$s.err" &
        pid=$!
        for _ in $(seq 600); do grep -q Tracing "/tmp/progs.$b.$s.err" && break; sleep 0.1; done
        chroot "$ROOT" bpftool prog show | awk '/^[0-9]+: / { id = $1; sub(":", "", id); type = $2; name = $4 }
            /xlated/ && id { print id, type, name; id = "" }' | while read -r id type name; do
            case $name in fslat_*) ;; *) continue ;; esac
            x="$OUT/$b.$s.$name.xlated"
            chroot "$ROOT" bpftool prog dump xlated id "$id" >"$x"
            insns=$(grep -c '^ *[0-9]*: (' "$x")
            calls=$(grep -o 'call [a-z_0-9#]*' "$x" | sed 's/call //; s/#.*//' | sort | uniq -c | awk '{ printf "%s%s×%s", sep, $2, $1; sep = " " }')
            echo "$f | $script | $type $name | $insns | $calls"
        done
        kill -INT "$pid"
        wait "$pid"
    done <<<"$PROGS_SCRIPTS"
done
