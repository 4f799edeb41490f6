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
"""

import ctypes
import os
import socket
import sys
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


what = sys.argv[1]
if what == "tcp":
    tcp(int(sys.argv[2]))
else:
    {"kill": kill, "setuid": setuid, "threads": threads, "resolve": resolve}[what]()
