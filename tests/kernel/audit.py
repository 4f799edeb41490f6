"""Known sys.audit events (python3's `audit` USDT probe): 1000 of "fslat.test", then 10
times "fslat.slow", a 5 ms sleep, "fslat.slow.done"."""
import sys
import time

for i in range(1000):
    sys.audit("fslat.test", i)
for i in range(10):
    sys.audit("fslat.slow", i)
    time.sleep(0.005)
    sys.audit("fslat.slow.done", i)
