"""What a fixed supervisor tick costs: N threads each waking every ``--poll-s`` and going back
to sleep, as every camera's capture supervisor did (a 50 ms tick) before it slept until a stall
could be due.

    python -m benchmarks.supervisor_ticks --threads 50
"""

from __future__ import annotations

import argparse
import os
import threading
import time


def cpu_ms_per_s(threads: int, poll_s: float, seconds: float) -> float:
    """CPU ms per second of wall time that ``threads`` idle tickers cost this process."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(poll_s):
            pass

    workers = [threading.Thread(target=tick, daemon=True) for _ in range(threads)]
    t0, w0 = os.times(), time.monotonic()
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join(5)
    t1, wall = os.times(), time.monotonic() - w0
    return 1000.0 * ((t1.user + t1.system) - (t0.user + t0.system)) / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for r in range(args.repeats):
        costs = {p: cpu_ms_per_s(args.threads, p, args.seconds) for p in (0.05, 10.0)}
        print(
            f"repeat {r}: {args.threads} threads ticking every 50 ms: {costs[0.05]:.1f} ms of "
            f"CPU a second; every 10 s: {costs[10.0]:.1f}; load average {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
