"""Known sys.audit events (python3's `audit` USDT probe): 1000 of "fslat.test", then 10
times "fslat.slow", a 5 ms sleep, "fslat.slow.done". With UFUNC_GO=FILE in its environment it first waits until FILE exists
(workload.py's exec-now): fslat attaches to this very process, with python3 mapped."""
import os
import sys
import time

go = os.environ.get("UFUNC_GO")
while go and not os.path.exists(go):
    time.sleep(0.01)

for i in range(1000):
    sys.audit("fslat.test", i)
for i in range(10):
    sys.audit("fslat.slow", i)
    time.sleep(0.005)
    sys.audit("fslat.slow.done", i)
