#!/usr/bin/env python3
"""Known workloads for tests/kernel/bpftrace-tools, one per argument, each done by a
process named `fslatbt-py` (prctl PR_SET_NAME), so the tracers' lines of it can be told
from the rest of the guest. What each does is the known answer the script checks.

    work.py kill         kill(2) of itself with signal 0 twice (0) and of pid 999999 once (-3)
    work.py setuid       setuid(0), setresuid(0, 0, 0), setfsuid(0): each succeeds as root
    work.py tcp PORT     listens on 127.0.0.1:PORT, connects to it 3 times, accepts the 3,
                         closes all six sockets
    work.py threads      starts 3 threads (3 pthread_create) and joins them
    work.py resolve      getaddrinfo("localhost") 3 times
    work.py tls PORT     a TLS server thread and a client over 127.0.0.1:PORT (a
                         self-signed certificate made with openssl(1)): one handshake
                         each side, then the client sends 5 bytes and the server reads
                         them
    work.py mkdir N      mkdir(2) of N directories under a new temporary one
    work.py swap CGROUP  4 MiB of its own memory pushed out to swap (CGROUP's memory.reclaim,
                         with swap readahead off), then read back; prints `swapped PAGES`,
                         the pages /proc/self/smaps said were out (each one swap-in)
    work.py oom CGROUP   a child, in CGROUP (memory.max 16 MiB, no swap), allocates 64 MiB:
                         the OOM killer kills it; prints `killed PID`
    work.py synretrans PORT
                         a listener with an accept queue of one (listen(0)) holding one
                         connection: a second connect's SYN is dropped and sent again once
                         after 1 s; the connect gives up at 1.5 s
"""

import ctypes
import mmap
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading

libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(15, b"fslatbt-py", 0, 0, 0)  # PR_SET_NAME


def kill():
    os.kill(os.getpid(), 0)
    os.kill(os.getpid(), 0)
    try:
        os.kill(999999, 0)
    except ProcessLookupError:
        pass


def setuid():
    os.setuid(0)
    os.setresuid(0, 0, 0)
    libc.setfsuid(0)


def tcp(port):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(8)
    clients = []
    for _ in range(3):
        c = socket.socket()
        c.connect(("127.0.0.1", port))
        clients.append(c)
    accepted = [server.accept()[0] for _ in range(3)]
    # The client closes first (its side goes FIN_WAIT1 ... CLOSE after the server's close).
    for c, a in zip(clients, accepted):
        c.close()
        a.close()
    server.close()


def threads():
    ts = [threading.Thread(target=lambda: None) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def resolve():
    for _ in range(3):
        socket.getaddrinfo("localhost", 80, socket.AF_INET, socket.SOCK_STREAM)


def tls(port):
    d = tempfile.mkdtemp()
    key, cert = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-subj", "/CN=localhost", "-days", "1", "-keyout", key, "-out", cert],
        check=True, capture_output=True,
    )
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(cert)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(1)
    got = []

    def serve():
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as s:
            got.append(s.recv(5))

    t = threading.Thread(target=serve)
    t.start()
    with client_ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)),
                                server_hostname="localhost") as c:
        c.sendall(b"hello")
        t.join()
    listener.close()
    assert got == [b"hello"], got


def mkdir(n):
    top = tempfile.mkdtemp()
    for i in range(n):
        os.mkdir(os.path.join(top, str(i)))


def enter(cgroup):
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


def swapped_kb(start):
    """The Swap: of the mapping at `start` in /proc/self/smaps, in KiB."""
    inside = False
    for line in open("/proc/self/smaps"):
        if "-" in line.split()[0] and ":" not in line.split()[0]:
            inside = int(line.split("-")[0], 16) == start
        elif inside and line.startswith("Swap:"):
            return int(line.split()[1])
    raise SystemExit("mapping not found in smaps")


def swap(cgroup):
    with open("/proc/sys/vm/page-cluster", "w") as f:
        f.write("0")  # one page per swap-in: no readahead
    enter(cgroup)
    size = 4 << 20
    m = mmap.mmap(-1, size)
    m.madvise(mmap.MADV_NOHUGEPAGE)
    start = ctypes.addressof(ctypes.c_char.from_buffer(m))
    for i in range(0, size, 4096):
        m[i] = 1
    # Three times: a page written out by one pass stays in the swap cache until the next
    # pass frees it (and a swap-in from the cache reads nothing).
    fd = os.open(os.path.join(cgroup, "memory.reclaim"), os.O_WRONLY)
    for _ in range(3):
        try:
            os.write(fd, str(size).encode())
        except BlockingIOError:
            pass  # EAGAIN: less than asked could be reclaimed
    os.close(fd)
    pages = swapped_kb(start) // 4
    total = sum(m[i] for i in range(0, size, 4096))
    assert total == size // 4096, total
    print(f"swapped {pages}")


def oom(cgroup):
    pid = os.fork()
    if pid == 0:
        enter(cgroup)
        hog = b"x" * (64 << 20)
        os._exit(len(hog) and 0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9, status
    print(f"killed {pid}")


def synretrans(port):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(0)
    first = socket.create_connection(("127.0.0.1", port))
    second = socket.socket()
    second.settimeout(1.5)
    try:
        second.connect(("127.0.0.1", port))
        raise SystemExit("the second connect was not refused")
    except socket.timeout:
        pass
    second.close()
    first.close()
    listener.close()


what = sys.argv[1]
if what == "tcp":
    tcp(int(sys.argv[2]))
elif what == "tls":
    tls(int(sys.argv[2]))
elif what == "synretrans":
    synretrans(int(sys.argv[2]))
elif what == "mkdir":
    mkdir(int(sys.argv[2]))
elif what in ("swap", "oom"):
    {"swap": swap, "oom": oom}[what](sys.argv[2])
else:
    {"kill": kill, "setuid": setuid, "threads": threads, "resolve": resolve}[what]()
