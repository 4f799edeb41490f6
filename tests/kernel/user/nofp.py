# Debian's python3 (built without frame pointers) with a known chain: outer() calls
# inner(), which reads 4321 bytes with os.read, then the process exits.
import os


def inner(fd):
    return os.read(fd, 4321)


def outer():
    fd = os.open("/proc/self/exe", os.O_RDONLY)
    n = len(inner(fd))
    os.close(fd)
    return n


outer()
