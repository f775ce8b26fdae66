"""A small Python program profiled by the pyroscope-io SDK (PyPI), for profilink's Pyroscope
receiver test: `python3 app.py SERVER_ADDRESS SECONDS` runs a busy loop in two functions for
SECONDS, pushing its CPU profile to SERVER_ADDRESS every second, then shuts the SDK down
(which pushes what is left)."""
import sys
import time

import pyroscope

pyroscope.configure(
    application_name="pyapp",
    server_address=sys.argv[1],
    tags={"region": "eu"},
    upload_interval=1,
)


def busy_leaf():
    s = 0
    for i in range(20000):
        s += i * i
    return s


def busy_root(seconds):
    t = time.time()
    while time.time() - t < seconds:
        busy_leaf()


busy_root(float(sys.argv[2]))
pyroscope.shutdown()
