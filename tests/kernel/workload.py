#!/usr/bin/env python3
"""Workloads for fslat's kernel tests: each does a known pattern of reads.

Every workload waits for `--go FILE` to exist before it starts (polling with stat, which
makes no reads), so a test can start it, learn its pid, attach fslat, then let it run.
"""

import argparse
import os
import shutil
import socket
import sys
import tempfile
import threading
import time


def wait_for(path):
    if not path:
        return
    while not os.path.exists(path):
        time.sleep(0.01)


def ordinary_reads(n):
    """n one-byte reads of a regular file; returns how long each took (ns), as this
    process saw it around the system call (which holds the kernel's vfs_read)."""
    took = []
    with tempfile.TemporaryFile(dir="/tmp") as f:
        f.write(b"x" * 64)
        f.flush()
        fd = f.fileno()
        for i in range(n):
            t = time.monotonic_ns()
            os.pread(fd, 1, i % 64)
            took.append(time.monotonic_ns() - t)
    return took


def say_slow_ordinary(took):
    """One stdout line of the ordinary reads that took 5 ms or more (in us), for
    `check.py slow-reads`: a guest stopped by a loaded host can stretch any read
    (10-15 ms seen, more possible), and such a read passes a latency threshold as the
    slow one does."""
    slow = [t // 1000 for t in took if t >= 5_000_000]
    print(f"slow-read: ordinary reads of 5 ms or more (us): {slow}", flush=True)


def sized_reads(spec):
    """pread(2) calls asking for known sizes, spec `SIZE:N,...` (N calls asking SIZE bytes)
    of a regular file big enough for the largest."""
    sizes = [(int(size), int(n)) for size, n in (p.split(":") for p in spec.split(","))]
    with tempfile.TemporaryFile(dir="/tmp") as f:
        f.write(b"x" * max(size for size, _ in sizes))
        f.flush()
        for size, n in sizes:
            for _ in range(n):
                os.pread(f.fileno(), size, 0)


def preads_and_reads(n, m):
    """n one-byte pread(2) calls, then m one-byte read(2) calls, of a regular file."""
    with tempfile.TemporaryFile(dir="/tmp") as f:
        f.write(b"x" * 64)
        f.flush()
        fd = f.fileno()
        for i in range(n):
            os.pread(fd, 1, i % 64)
        for i in range(m):
            os.lseek(fd, i % 64, os.SEEK_SET)
            os.read(fd, 1)


# Two named functions, one calling the other, with frame pointers; the inner one makes the
# read system call itself (inline, no libc wrapper: glibc is built without frame pointers,
# and the kernel's frame-pointer walk would skip the wrapper's caller).
USTACK_C = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static inline __attribute__((always_inline)) long sys_read(int fd, void *buf, unsigned long n)
{
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(0), "D"(fd), "S"(buf), "d"(n)
                     : "rcx", "r11", "memory");
    return ret;
}

__attribute__((noinline)) long read_chunk(int fd, char *buf)
{
    return sys_read(fd, buf, 1);
}

__attribute__((noinline)) long load_config(int fd, int n)
{
    char buf[1];
    long total = 0;
    for (int i = 0; i < n; i++)
        total += read_chunk(fd, buf);
    return total;
}

int main(int argc, char **argv)
{
    int fd = open(argv[0], O_RDONLY);
    if (fd < 0 || load_config(fd, atoi(argv[1])) != atoi(argv[1]))
        return 1;
    /* Exit soon after, but not within moments of the first traced call: fslat reads
       the mappings when it first sees the process (docs/language.md, "Stacks"). */
    usleep(300000);
    return 0;
}
"""


def build_ustack_program():
    """Compiles USTACK_C (gcc, else clang) into a new directory in /tmp; its path."""
    import shutil
    import subprocess
    cc = shutil.which("gcc") or shutil.which("clang")
    d = tempfile.mkdtemp(prefix="fslat-ustack-", dir="/tmp")
    src, exe = os.path.join(d, "ustack.c"), os.path.join(d, "ustack")
    with open(src, "w") as f:
        f.write(USTACK_C)
    subprocess.run([cc, "-O0", "-fno-omit-frame-pointer", "-o", exe, src], check=True)
    return exe


def blocked_in_pipe_read(pid, tid, fd, wchan_name="pipe_read", syscall="0"):
    """Whether thread tid of pid sleeps in the kernel's pipe read of fd: per its wchan,
    or where wchan says only "0" (Linux 5.10), per its system call (read, 0 on x86-64,
    of fd) and its state (S). With pipe_write and 1, the same for a pipe write."""
    task = f"/proc/{pid}/task/{tid}"
    try:
        with open(f"{task}/wchan") as f:
            wchan = f.read().strip()
        if wchan != "0":
            return wchan_name in wchan
        with open(f"{task}/syscall") as f:
            call = f.read().split()
        with open(f"{task}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return len(call) > 1 and call[0] == syscall and int(call[1], 16) == fd and state == "S"
    except (OSError, ValueError, IndexError):
        return False


def slow_pipe_read(delay_ms, ask=1):
    """One read (of `ask` bytes; one arrives) from a pipe whose writer waits delay_ms.

    The writer starts its wait only once the reader sleeps inside read(2), so the
    read takes at least delay_ms in the kernel however busy the reader's process is.
    """
    r, w = os.pipe()
    reader, tid = os.getpid(), threading.get_native_id()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        give_up = time.monotonic() + 10
        while not blocked_in_pipe_read(reader, tid, r) and time.monotonic() < give_up:
            time.sleep(0.001)
        time.sleep(delay_ms / 1000)
        os.write(w, b"!")
        os._exit(0)
    os.close(w)
    data = os.read(r, ask)
    os.waitpid(pid, 0)
    os.close(r)
    assert data == b"!"


def wakes(n, delay_ms):
    """A child named fslat-wakee sleeps in a pipe read n times; each time, once it sleeps
    there, this process waits delay_ms and writes one byte: n wakeups of the child, each
    followed by its switch back onto a CPU."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        with open("/proc/self/comm", "w") as f:
            f.write("fslat-wakee")
        for _ in range(n):
            if os.read(r, 1) != b"!":
                os._exit(1)
        os._exit(0)
    for _ in range(n):
        give_up = time.monotonic() + 10
        while not blocked_in_pipe_read(pid, pid, r) and time.monotonic() < give_up:
            time.sleep(0.001)
        time.sleep(delay_ms / 1000)
        os.write(w, b"!")
    _, status = os.waitpid(pid, 0)
    os.close(r)
    os.close(w)
    assert status == 0


def hogs(n, spin_ms, rounds, out):
    """n children named fslat-hog on CPU 0, each `rounds` times: spin spin_ms on the CPU,
    then sleep 2 ms. They wait their turn behind one another (switched out while still
    runnable) and after each sleep (woken). Once each has exited, before it is reaped,
    this process writes to `out` a line `PID SWITCH_INS RUN_DELAY_NS` from the kernel's
    own count of its switches onto a CPU and its total wait on the run queue
    (/proc/PID/schedstat, kept while the child is a zombie)."""
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            with open("/proc/self/comm", "w") as f:
                f.write("fslat-hog")
            os.sched_setaffinity(0, {0})
            for _ in range(rounds):
                stop = time.monotonic() + spin_ms / 1000
                while time.monotonic() < stop:
                    pass
                time.sleep(0.002)
            os._exit(0)
        pids.append(pid)
    lines = []
    for pid in pids:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        with open(f"/proc/{pid}/schedstat") as f:
            _, run_delay, switch_ins = f.read().split()
        lines.append(f"{pid} {switch_ins} {run_delay}\n")
        _, status = os.waitpid(pid, 0)
        assert status == 0
    with open(out, "w") as f:
        f.writelines(lines)


def tcp_sends(port, sends, gap_ms):
    """A loopback TCP connection to `port`, all in this thread: connect, `sends` one-byte
    sends (TCP_NODELAY, each read by the server before the next, gap_ms apart), close.

    The client's socket (destination port `port`) transmits exactly sends + 4 segments:
    SYN, the handshake's ACK, one per send, FIN, and the ACK of the server's FIN. Loopback
    delivers each in a softirq nested in its transmit, where the server's ACK is
    transmitted: a call of the same function nested on the same thread.
    """
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(1)
    cli = socket.create_connection(("127.0.0.1", port))
    cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn, _ = srv.accept()
    for _ in range(sends):
        cli.send(b"x")
        assert conn.recv(16) == b"x"
        time.sleep(gap_ms / 1000)
    cli.close()
    assert conn.recv(16) == b""
    conn.close()
    srv.close()


def fd_of(pid, path, give_up):
    """The descriptor by which process pid has `path` open, once it has (None past give_up)."""
    while time.monotonic() < give_up:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                    return int(fd)
        except OSError:
            pass
        time.sleep(0.001)
    return None


def slow_fifo_read(delay_ms, name, depth=0):
    """One read of one byte from a named FIFO whose writer waits delay_ms first; with
    `depth` N, the FIFO is /tmp/fslat-deep/d1/d2/.../dN/NAME.

    As in slow_pipe_read, the writer starts its wait only once the reader sleeps inside
    read(2), so the read takes at least delay_ms in the kernel (a 7.2 guest saw 49.2 ms when the
    wait began at the open)."""
    base = "/tmp"
    if depth:
        base = os.path.join("/tmp", "fslat-deep", *[f"d{i}" for i in range(1, depth + 1)])
        os.makedirs(base, exist_ok=True)
    path = os.path.join(base, name)
    if os.path.exists(path):
        os.unlink(path)
    os.mkfifo(path)
    reader, tid = os.getpid(), threading.get_native_id()
    pid = os.fork()
    if pid == 0:
        fd = os.open(path, os.O_WRONLY)
        give_up = time.monotonic() + 10
        rfd = fd_of(reader, path, give_up)
        while (rfd is not None and not blocked_in_pipe_read(reader, tid, rfd)
               and time.monotonic() < give_up):
            time.sleep(0.001)
        time.sleep(delay_ms / 1000)
        os.write(fd, b"!")
        os._exit(0)
    fd = os.open(path, os.O_RDONLY)
    data = os.read(fd, 1)
    os.waitpid(pid, 0)
    os.close(fd)
    os.unlink(path)
    assert data == b"!"


def slow_pipe_write(delay_ms):
    """One write of one byte into a full pipe that its reader drains after delay_ms.

    The reader starts its wait only once the writer sleeps inside write(2), so the
    write takes at least delay_ms in the kernel however busy the writer's process is.
    """
    r, w = os.pipe()
    writer, tid = os.getpid(), threading.get_native_id()
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    pid = os.fork()
    if pid == 0:
        os.close(w)
        give_up = time.monotonic() + 10
        while (not blocked_in_pipe_read(writer, tid, w, "pipe_write", "1")
               and time.monotonic() < give_up):
            time.sleep(0.001)
        time.sleep(delay_ms / 1000)
        while os.read(r, 65536):
            pass
        os._exit(0)
    os.close(r)
    os.write(w, b"!")
    os.close(w)
    os.waitpid(pid, 0)


def block_reads(dev, n):
    """N reads of 4 KiB at distinct offsets of block device DEV with O_DIRECT: each one
    request to the device (no page cache, no read-ahead)."""
    import mmap
    buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT wants
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    for i in range(n):
        if os.preadv(fd, [buf], i * 4096) != 4096:
            sys.exit(f"short read of {dev}")
    os.close(fd)


def reads_and_writes(reads, writes):
    """Exactly `writes` one-byte pwrites, then `reads` one-byte preads, of a file that
    needs no write to create (O_TMPFILE): one vfs_write and one vfs_read call each."""
    fd = os.open("/tmp", os.O_TMPFILE | os.O_RDWR, 0o600)
    for i in range(writes):
        os.pwrite(fd, b"x", i % 64)
    for i in range(reads):
        os.pread(fd, 1, i % max(writes, 1))
    os.close(fd)


def writes(items):
    """One write(2) per item to a new empty file (O_TMPFILE), appending: an item that is
    a number N writes N bytes of `x`, `pause:MS` writes nothing and waits MS, anything
    else writes its own bytes."""
    fd = os.open("/tmp", os.O_TMPFILE | os.O_RDWR, 0o600)
    for item in items:
        if item.startswith("pause:"):
            time.sleep(int(item[len("pause:"):]) / 1000)
        else:
            os.write(fd, b"x" * int(item) if item.isdigit() else item.encode())
    os.close(fd)


CGROUP_ROOT = "/sys/fs/cgroup"


def move_to_cgroup(path):
    """Moves this process into the cgroup v2 at PATH (below the mount)."""
    fd = os.open(CGROUP_ROOT + path + "/cgroup.procs", os.O_WRONLY)
    try:
        os.write(fd, str(os.getpid()).encode())
    finally:
        os.close(fd)


def cgroup_reads(home, spec, late):
    """spec: PATH:N items, each N one-byte preads made from within cgroup PATH (created
    before the pid is printed); late: the same, for cgroups created after the go file and,
    once their reads are done and half a second has passed, removed. Between them the
    process is back in its own cgroup, HOME."""
    with tempfile.TemporaryFile(dir="/tmp") as f:
        f.write(b"x" * 64)
        f.flush()
        fd = f.fileno()
        def reads_in(path, n):
            move_to_cgroup(path)
            for i in range(n):
                os.pread(fd, 1, i % 64)
            move_to_cgroup(home)
        for path, n in spec:
            reads_in(path, n)
        for path, n in late:
            os.makedirs(CGROUP_ROOT + path)
            reads_in(path, n)
            time.sleep(0.5)
            os.rmdir(CGROUP_ROOT + path)


def cgroup_spec(items):
    out = []
    for item in items:
        path, n = item.rsplit(":", 1)
        out.append((path, int(n)))
    return out


PG_BIN = "/usr/lib/postgresql/15/bin"


def pg_backend(pgdir):
    """Starts a PostgreSQL cluster in pgdir (tests/kernel/pg-setup) and one psql session
    on it; returns the psql process and its backend's pid (the process the postmaster
    forked for the connection, found by its title: `postgres: USER DB [local] ...`)."""
    import subprocess
    subprocess.run(["tests/kernel/pg-setup", pgdir], check=True)
    before = set(os.listdir("/proc"))
    psql = subprocess.Popen(["runuser", "-u", "postgres", "--", "psql", "-h", pgdir, "-X",
                             "-q", "-o", "/dev/null", "postgres"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    psql.stdin.write("SELECT 1;\n")
    psql.stdin.flush()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for pid in set(os.listdir("/proc")) - before:
            try:
                title = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            if title.startswith(b"postgres: postgres postgres [local]"):
                return psql, int(pid)
        time.sleep(0.05)
    sys.exit("workload: no PostgreSQL backend for the psql session")


def pg_queries(psql, pgdir):
    """pg-queries' mix over the session: 50 `SELECT pg_sleep(0.02);` and 50 `SELECT 1;`
    interleaved; then the session ends and the cluster stops."""
    import subprocess
    for _ in range(50):
        psql.stdin.write("SELECT pg_sleep(0.02);\nSELECT 1;\n")
    psql.stdin.close()
    psql.wait()
    subprocess.run(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D",
                    f"{pgdir}/pgdata", "-m", "fast", "-w", "stop"],
                   stdout=subprocess.DEVNULL, check=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--go", help="start once this file exists")
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("slow-read", help="N ordinary reads, then one slow pipe read")
    s.add_argument("--reads", type=int, default=64)
    s.add_argument("--delay-ms", type=int, default=50)
    s = sub.add_parser("reads", help="N one-byte reads of a file")
    s.add_argument("n", type=int)
    s = sub.add_parser("preads-reads", help="N pread calls, then M read calls, of a file")
    s.add_argument("n", type=int)
    s.add_argument("m", type=int)
    s = sub.add_parser("ustack-c", help="exec a C program: main, load_config, read_chunk: N reads")
    s.add_argument("n", type=int)
    s = sub.add_parser("repeat", help="run PROGRAM ARGS... N times, one after the other")
    s.add_argument("n", type=int)
    s.add_argument("argv", nargs="+")
    s = sub.add_parser("repeat-sh", help="N times: sh -c 'true; exec PROGRAM ARGS...'")
    s.add_argument("n", type=int)
    s.add_argument("argv", nargs="+")
    s = sub.add_parser("exec", help="exec PROGRAM ARGS... (the same pid)")
    s.add_argument("argv", nargs="+")
    s = sub.add_parser("exec-now", help="exec PROGRAM ARGS... at once, UFUNC_GO naming the go file")
    s.add_argument("argv", nargs="+")
    sub.add_parser("ebadf", help="a read on a write-only descriptor")
    s = sub.add_parser("threads", help="T threads reading for SECONDS, and N slow reads")
    s.add_argument("threads", type=int)
    s.add_argument("seconds", type=float)
    s.add_argument("--delay-ms", type=int, default=50)
    s.add_argument("--slow-reads", type=int, default=1)
    s = sub.add_parser("slow-fifo", help="one slow read of a named FIFO in /tmp")
    s.add_argument("--delay-ms", type=int, default=50)
    s.add_argument("--name", default="fslat-slow-fifo")
    s.add_argument("--depth", type=int, default=0, help="in N nested directories")
    s = sub.add_parser("tcp", help="a loopback TCP connection: N one-byte sends")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--sends", type=int, default=10)
    s.add_argument("--gap-ms", type=int, default=10)
    s = sub.add_parser("slow-write", help="a slow read, then a write that waits for room")
    s.add_argument("--delay-ms", type=int, default=50)
    s = sub.add_parser("open", help="create PATH, then open it for reading")
    s.add_argument("path")
    s = sub.add_parser("block-reads", help="N direct 4 KiB reads of block device DEV")
    s.add_argument("dev")
    s.add_argument("n", type=int)
    s = sub.add_parser("read-write", help="R one-byte reads and W one-byte writes of a file")
    s.add_argument("reads", type=int)
    s.add_argument("writes", type=int)
    s = sub.add_parser("wakes", help="a child named fslat-wakee woken N times, MS apart")
    s.add_argument("n", type=int)
    s.add_argument("ms", type=int)
    s = sub.add_parser("hogs", help="N children fslat-hog on CPU 0, ROUNDS of SPIN_MS on the CPU and a 2 ms sleep; the kernel's counts into OUT")
    s.add_argument("n", type=int)
    s.add_argument("spin_ms", type=int)
    s.add_argument("rounds", type=int)
    s.add_argument("out")
    s = sub.add_parser("bursts", help="N bursts of READS one-byte reads, PAUSE_MS apart")
    s.add_argument("n", type=int)
    s.add_argument("reads", type=int)
    s.add_argument("pause_ms", type=int)
    s = sub.add_parser("pipe-delays", help="slow pipe reads: MS:N,... (N reads waiting MS)")
    s.add_argument("delays")
    s = sub.add_parser("sizes", help="preads of known sizes: SIZE:N,... (N preads of SIZE)")
    s.add_argument("spec")
    s.add_argument("--drain", action="store_true",
                   help="then read stdin to its end, 64 KiB a read (a pipeline's reader)")
    s = sub.add_parser("writes", help="one write per item to an empty file: N bytes, or the text")
    s.add_argument("items", nargs="+")
    s = sub.add_parser("rename", help="create OLD in a new directory, rename it to NEW")
    s.add_argument("old")
    s.add_argument("new")
    s = sub.add_parser("cgroup-reads",
                       help="N one-byte preads from within each cgroup v2 PATH: PATH:N ...")
    s.add_argument("items", nargs="*")
    s.add_argument("--late", action="append", default=[],
                   help="PATH:N: a cgroup made after the go file, removed after its reads")
    s = sub.add_parser("pg-backend", help="a PostgreSQL cluster in DIR and one psql session: "
                       "prints its backend's pid, not its own; then pg-queries' 50 and 50")
    s.add_argument("dir")
    s = sub.add_parser("sleep", help="just wait, reading nothing")
    s.add_argument("seconds", type=float)
    a = p.parse_args()

    ustack_exe = build_ustack_program() if a.what == "ustack-c" else None
    if a.what == "cgroup-reads":
        # Read now: after the go file the workload reads only in the cgroups it names.
        with open("/proc/self/cgroup") as f:
            home = f.read().split("::", 1)[1].strip()
        for path, _ in cgroup_spec(a.items):
            os.makedirs(CGROUP_ROOT + path, exist_ok=True)
    if a.what == "pg-backend":
        # The process to trace (-p $PID) is the backend the session's queries run in.
        psql, backend = pg_backend(a.dir)
        print(backend, flush=True)
        wait_for(a.go)
        pg_queries(psql, a.dir)
        return
    print(os.getpid(), flush=True)
    if a.what == "exec-now":
        # The program runs (and can be found by pid) before fslat starts; it waits for
        # the go file itself (tests/kernel/user/ufunc.c).
        env = dict(os.environ, UFUNC_GO=a.go) if a.go else os.environ
        os.execve(a.argv[0], a.argv, env)
    wait_for(a.go)
    if a.what == "slow-read":
        took = ordinary_reads(a.reads)
        slow_pipe_read(a.delay_ms)
        say_slow_ordinary(took)
    elif a.what == "reads":
        ordinary_reads(a.n)
    elif a.what == "preads-reads":
        preads_and_reads(a.n, a.m)
    elif a.what == "ustack-c":
        # The same process, so the same pid, becomes the C program.
        os.execv(ustack_exe, [ustack_exe, str(a.n)])
    elif a.what == "exec":
        os.execv(a.argv[0], a.argv)
    elif a.what in ("repeat", "repeat-sh"):
        import subprocess
        # repeat-sh: the shell runs (and reads, loading libc) before it becomes PROGRAM.
        argv = ["sh", "-c", 'true; exec "$0" "$@"'] + a.argv if a.what == "repeat-sh" else a.argv
        for _ in range(a.n):
            subprocess.run(argv, check=True)
    elif a.what == "tcp":
        tcp_sends(a.port, a.sends, a.gap_ms)
    elif a.what == "ebadf":
        fd = os.open("/tmp/fslat-ebadf", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.read(fd, 1)
        except OSError as e:
            print(f"read failed: errno {e.errno}", file=sys.stderr)
        os.close(fd)
    elif a.what == "threads":
        stop = time.monotonic() + a.seconds
        def reader():
            while time.monotonic() < stop:
                ordinary_reads(16)
        ts = [threading.Thread(target=reader) for _ in range(a.threads)]
        for t in ts:
            t.start()
        # Known slow reads, told apart from the threads' 1-byte reads by their size.
        for _ in range(a.slow_reads):
            slow_pipe_read(a.delay_ms, ask=7)
        for t in ts:
            t.join()
    elif a.what == "slow-fifo":
        slow_fifo_read(a.delay_ms, a.name, a.depth)
    elif a.what == "slow-write":
        slow_pipe_read(a.delay_ms)
        slow_pipe_write(a.delay_ms)
    elif a.what == "open":
        with open(a.path, "w"):
            pass
        fd = os.open(a.path, os.O_RDONLY)
        os.close(fd)
    elif a.what == "block-reads":
        block_reads(a.dev, a.n)
    elif a.what == "read-write":
        reads_and_writes(a.reads, a.writes)
    elif a.what == "wakes":
        wakes(a.n, a.ms)
    elif a.what == "hogs":
        hogs(a.n, a.spin_ms, a.rounds, a.out)
    elif a.what == "bursts":
        for i in range(a.n):
            if i:
                time.sleep(a.pause_ms / 1000)
            ordinary_reads(a.reads)
    elif a.what == "pipe-delays":
        for part in a.delays.split(","):
            ms, n = part.split(":")
            for _ in range(int(n)):
                slow_pipe_read(int(ms))
    elif a.what == "sizes":
        sized_reads(a.spec)
        while a.drain and os.read(0, 65536):
            pass
    elif a.what == "writes":
        writes(a.items)
    elif a.what == "rename":
        d = tempfile.mkdtemp()
        open(os.path.join(d, a.old), "w").close()
        os.rename(os.path.join(d, a.old), os.path.join(d, a.new))
        shutil.rmtree(d)
    elif a.what == "cgroup-reads":
        cgroup_reads(home, cgroup_spec(a.items), cgroup_spec(a.late))
    elif a.what == "sleep":
        time.sleep(a.seconds)


if __name__ == "__main__":
    main()
