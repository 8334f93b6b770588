"""Peak anonymous memory (heap: what allocations use) of a piece of work, measured in a fresh Python process.

The resident-size high-water mark (ru_maxrss) also counts pages of shared libraries faulted in along the way,
which vary from run to run by 150 MiB and more; RssAnon from /proc does not. It is sampled every millisecond
in a thread while the work runs, so a peak shorter than that could be missed (the measurement errs low).
"""
import os
import subprocess
import sys
from pathlib import Path

AVAILABLE = Path("/proc/self/status").exists()

_SAMPLER = """
import threading, time

def _anon():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")

def peak_during(work):
    start, peak, done = _anon(), [0], []
    def sample():
        while not done:
            peak[0] = max(peak[0], _anon() - start)
            time.sleep(0.001)
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    work()
    done.append(True)
    thread.join()
    return max(peak[0], _anon() - start)
"""


def peak_bytes(setup: str, work: str, *args: str, timeout: float = 1800) -> int:
    """Run ``setup`` (imports, data) and then ``work`` (a Python expression) in a fresh interpreter (the timeout is
    generous: on a shared 2-core machine a 20 s run took over 5 minutes); the peak of
    anonymous memory above what there was before ``work`` started. ``args`` become ``sys.argv[1:]``."""
    code = f"{_SAMPLER}\nimport sys\n{setup}\nprint(peak_during(lambda: {work}))\n"
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ), check=True).stdout
    return int(out.split()[-1])
