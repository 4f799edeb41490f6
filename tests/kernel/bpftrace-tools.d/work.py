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
"""

import ctypes
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


what = sys.argv[1]
if what == "tcp":
    tcp(int(sys.argv[2]))
elif what == "tls":
    tls(int(sys.argv[2]))
else:
    {"kill": kill, "setuid": setuid, "threads": threads, "resolve": resolve}[what]()
