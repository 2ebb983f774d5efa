"""Ctrl-C while waiting for a batch: KeyboardInterrupt within a second, with every pipeline
thread stopped and joined before the exception reaches the caller."""

import signal
import subprocess
import sys
import time

CHILD = r"""
import os, signal, sys, stokehold
# Python's Ctrl-C handler even when started from a background job, whose SIGINT the shell
# ignores (and a child inherits that): the test is about what happens when Ctrl-C arrives.
signal.signal(signal.SIGINT, signal.default_int_handler)
slow = {  # one thread making 768x768 color-jittered images: a batch takes over a second, a
    # sample some 30 ms (what stopping waits for: small, so that a loaded machine stops in time)
    "pipeline": {"batch": 128, "outputs": ["images"]},
    "op": [
        {"kind": "file_reader", "output": "jpegs"},
        {"kind": "decode", "input": "jpegs", "output": "decoded"},
        {"kind": "resize", "input": "decoded", "output": "big", "size": [768, 768]},
        {"kind": "color_jitter", "input": "big", "output": "images", "hue": 0.1, "saturation": 0.4},
    ],
}
p = stokehold.Pipeline(slow, sys.argv[1], threads=1, prefetch=1)
threads = len(os.listdir("/proc/self/task"))
print(f"iterating threads={threads}", flush=True)
try:
    while True:
        for batch in p:
            print("a batch came before the interrupt", flush=True)
except KeyboardInterrupt:
    print(f"interrupted threads={len(os.listdir('/proc/self/task'))}", flush=True)
    sys.exit(3)
"""


def test_ctrl_c_stops_within_a_second_and_joins_every_thread(builtin):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(builtin)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = child.stdout.readline()
        assert first.startswith("iterating threads="), first + child.stderr.read()
        assert int(first.split("=")[1]) > 1, "the pipeline runs threads of its own"
        time.sleep(0.3)  # inside the first batch's wait
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        child.wait(timeout=10)
        took = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
    out, err = child.stdout.read(), child.stderr.read()
    assert child.returncode == 3, out + err
    assert "a batch came" not in out, "the interrupt must land while waiting"
    assert "interrupted threads=1\n" in out, out + err
    assert took < 1.0, f"took {took:.2f} s to stop"
