#!/bin/bash
# Runs inside the guest booted by benches/misses: DIR holds threads, kcount.bpf.o and
# kloader; FSLAT is the fslat binary. One line per run: what was counted (counted=N,
# of 1000 calls) and what the kernel says it skipped.
set -u
D=${1:?the directory of threads, kcount.bpf.o and kloader}
F=${FSLAT:?}
RUNS=${RUNS:-20}
export XDG_CACHE_HOME=/tmp/cache
export PATH=$(echo "$PATH" | tr ':' '\n' | grep -v pyenv/shims | paste -sd:)
fslat_row() { # LABEL MODE SCRIPT [FLAGS]: FLAGS default -v (each program's own skips)
    local label=$1 mode=$2 script=$3 flags=${4--v} i n
    [[ "fslat $label" =~ ${ROWS:-.} ]] || return 0
    for i in $(seq "$RUNS"); do
        "$F" $flags --mode "$mode" -c "$D/threads" -e "$script" >/tmp/f.out 2>/tmp/f.err
        # The one row of `count() by tgid`, else the summary's calls.
        n=$(grep -E '^  tgid=' /tmp/f.out | awk '{print $2}')
        [[ -n $n ]] || n=$(grep -o 'calls=[0-9]*' /tmp/f.out | head -1 | cut -d= -f2)
        echo "fslat $label run $i: counted=$n $(grep -o 'missed=[0-9]*' /tmp/f.out | head -1) | $(grep 'skipped [0-9]* call' /tmp/f.err | grep -v warning | sed 's/fslat: vfs_read: program //' | tr '\n' ' ')"
    done
}
fslat_row "fsession, count() by tgid" fsession 'session vfs_read { count() by tgid }'
fslat_row "fentry, count() by tgid" fentry 'session vfs_read { count() by tgid }'
fslat_row "fsession-multi (vfs_read, vfs_readv), count() by tgid" fsession-multi 'session vfs_read, vfs_readv { count() by tgid }'
fslat_row "fsession, empty program (summary calls)" fsession 'session vfs_read { }'
fslat_row "fentry, empty program (summary calls)" fentry 'session vfs_read { }'
fslat_row "kprobe-session, count() by tgid" kprobe-session 'session vfs_read { count() by tgid }'
fslat_row "kprobe-session (vfs_read, vfs_readv), count() by tgid" kprobe-session 'session vfs_read, vfs_readv { count() by tgid }'
fslat_row "kprobe-session, empty program (summary calls)" kprobe-session 'session vfs_read { }'
fslat_row "auto (the default), count() by tgid" auto 'session vfs_read { count() by tgid }'
# Without -v, as a user runs it: on 7.2 an entry-only kprobe (`mode=kprobe`), since -v
# keeps the return probe for `errors`.
fslat_row "auto without -v (entry-only kprobe on 7.2), count() by tgid" auto 'session vfs_read { count() by tgid }' ""
for kind in "ksession" "kentry kreturn" "fentry fexit" "fentry_np fexit_np"; do
    [[ "C $kind" =~ ${ROWS:-.} ]] || continue
    for i in $(seq "$RUNS"); do
        "$D/kloader" "$D/kcount.bpf.o" $kind >/tmp/k.out 2>/tmp/k.err &
        pid=$!
        for _ in $(seq 3000); do
            grep -q Attached /tmp/k.err && break
            kill -0 $pid 2>/dev/null || break
            sleep 0.01
        done
        "$D/threads" 4 250
        kill -INT $pid
        wait $pid
        e=$(grep -o 'entries=[0-9]*' /tmp/k.out | cut -d= -f2)
        r=$(grep -o 'returns=[0-9]*' /tmp/k.out | cut -d= -f2)
        echo "C $kind run $i: counted=$((e < r ? e : r)) $(tr '\n' ' ' </tmp/k.out) $(grep -v Attached /tmp/k.err | tr '\n' ' ')"
    done
done
