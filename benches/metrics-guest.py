#!/usr/bin/env python3
"""The scrape benchmark, in the guest (benches/metrics runs it): what a Prometheus scrape
of 10 000 series costs fslat's --listen, and whether scraping costs tracing any events.

One fslat run traces two processes. `keys` reads with sizes 1 .. KEYS, so
`count() by count as by_size` holds KEYS keys, i.e. KEYS series. Then two equal read
storms are traced with `emit`: the first with no scraper, the second while a client
scrapes /metrics back to back. Prints a markdown table; figures are guest time.
"""

import os
import subprocess
import sys
import tempfile
import time
import urllib.request

FSLAT = os.environ.get("BENCH_FSLAT", "target/release/fslat")
KEYS = int(os.environ.get("BENCH_KEYS", "10000"))
STORM = int(os.environ.get("BENCH_STORM", "100000"))
PORT = 9435
work = tempfile.mkdtemp(dir="/tmp")

CHILD = r"""
import os, sys, time
go, what, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(os.getpid(), flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
fd = os.open("/tmp/bench-metrics-file", os.O_RDONLY)
t = time.monotonic()
for i in range(n):
    os.pread(fd, (i + 1) if what == "keys" else 1, 0)
print(time.monotonic() - t, flush=True)
"""


def child(name, what, n):
    go = os.path.join(work, f"go-{name}")
    p = subprocess.Popen([sys.executable, "-c", CHILD, go, what, str(n)],
                         stdout=subprocess.PIPE, text=True)
    return p, int(p.stdout.readline()), go


def scrape():
    t = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=30) as r:
        body = r.read()
    return time.monotonic() - t, body


def main():
    with open("/tmp/bench-metrics-file", "wb") as f:
        f.write(b"x" * (KEYS + 1))
    keys, kpid, kgo = child("keys", "keys", KEYS)
    quiet, qpid, qgo = child("quiet", "storm", STORM)
    busy, bpid, bgo = child("busy", "storm", STORM)
    prog = (f"session vfs_read where tgid == {kpid} {{ count() by count as by_size }}\n"
            f"session vfs_read where tgid == {qpid} {{ emit }}\n"
            f"session vfs_read where tgid == {bpid} {{ emit }}\n")
    out = os.path.join(work, "fslat.out")
    err = open(os.path.join(work, "fslat.err"), "w+")
    # A ring buffer that holds a whole storm: without a scraper nothing is dropped, so
    # any drop would be the scraper's doing.
    fslat = subprocess.Popen([FSLAT, "--listen", f"127.0.0.1:{PORT}", "--buffer-size", "64m",
                              "-o", out, "-e", prog],
                             stderr=err)
    while "Tracing" not in open(err.name).read():
        time.sleep(0.05)
    open(kgo, "w").close()
    keys.wait()
    time.sleep(2.5)  # two publishes
    secs, body = scrape()
    series = sum(1 for l in body.splitlines() if l.startswith(b"fslat_by_size_total{"))
    single = [scrape()[0] for _ in range(5)]
    open(qgo, "w").close()
    quiet_secs = float(quiet.stdout.readline())
    quiet.wait()
    open(bgo, "w").close()
    times = []
    while busy.poll() is None:
        times.append(scrape()[0])
    busy_secs = float(busy.stdout.readline())
    fslat.send_signal(2)
    fslat.wait()
    summaries = [l.split() for l in open(out) if l.startswith("SUMMARY")]
    fields = [dict(w.split("=", 1) for w in s[2:]) for s in summaries]
    times.sort()
    single.sort()
    print(f"| series in `fslat_by_size_total` | {series} |")
    print(f"| /metrics body | {len(body)} bytes |")
    print(f"| one scrape, idle tracing (median of 5) | {single[2] * 1000:.1f} ms |")
    print(f"| {STORM} traced reads with `emit`, no scraper | {quiet_secs * 1000:.0f} ms, "
          f"matched {fields[1]['matched']}, events {fields[1]['events']}, dropped {fields[1]['dropped']} |")
    print(f"| the same while scraping back to back | {busy_secs * 1000:.0f} ms, "
          f"matched {fields[2]['matched']}, events {fields[2]['events']}, dropped {fields[2]['dropped']} |")
    if times:
        print(f"| scrapes during that storm | {len(times)}, median "
              f"{times[len(times) // 2] * 1000:.1f} ms, max {times[-1] * 1000:.1f} ms |")
    print(f"| keys session | calls {fields[0]['calls']}, agg_lost {fields[0]['agg_lost']} |")


main()
