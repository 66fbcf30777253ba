"""The event store in the real daemon: the walkway's zone entries through ``vidpipe events``,
and what a ``kill -9`` and a full disk leave of it.

The walkway clip gives six zone entries per pass (tests/integration/test_demo_zone_e2e.py says
why six); here they must come back from the store, through the API and the command, as the
JSON lines sink saw them.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import free_port, metric, scrape, scrape_soon, wait_for
from tests.integration.test_demo_zone_e2e import CLIP_FRAMES, demo_walkway, records

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
TOKEN = "events-e2e-token-0123456789"


def vidpipe_events(port: int, *args: str) -> list[dict]:
    """``vidpipe events --json`` with the token in the environment, as an operator runs it."""
    proc = subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", "events", "--url", f"http://127.0.0.1:{port}",
         "--json", *args],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "VIDPIPE_TOKEN": TOKEN},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_the_walkways_six_zone_entries_come_back_from_vidpipe_events(
    repo_root: Path, assets_dir: Path, tmp_path: Path, run_daemon
) -> None:
    port = free_port()
    out = tmp_path / "walkway.jsonl"
    config = demo_walkway(repo_root, assets_dir)
    config["http"] = {"port": port, "token": TOKEN}
    config["sinks"] = [{"type": "jsonl", "path": str(out)}]
    daemon = run_daemon(config)  # events: on by default, the walkway has a zone

    def first_pass_done() -> bool:
        return daemon.proc.poll() is not None or any(
            r.get("frame", 0) >= CLIP_FRAMES for r in records(out)
        )

    wait_for(first_pass_done, 400, "a pass of the walkway clip")
    assert daemon.proc.poll() is None, daemon.log()[-3000:]

    def first_pass_enters() -> list[dict]:
        got = vidpipe_events(port, "--camera", "walkway", "--kind", "enter", "--limit", "1000")
        return [e for e in got if e["record"]["frame"] < CLIP_FRAMES]

    enters = wait_for(lambda: len(first_pass_enters()) >= 6, 30, "six entries stored")
    enters = first_pass_enters()
    assert enters and len(enters) == 6, [e["record"] for e in enters]
    assert {e["zone"] for e in enters} == {"table"}
    assert [e["ts"] for e in enters] == sorted((e["ts"] for e in enters), reverse=True)
    # the store holds what the sinks were given: the same six records
    sunk = [r for r in records(out) if r.get("event") == "enter" and r["frame"] < CLIP_FRAMES]
    assert sorted(e["record"]["tracker_id"] for e in enters) == sorted(
        r["tracker_id"] for r in sunk
    )
    assert {e["record"]["frame"] for e in enters} == {r["frame"] for r in sunk}
    assert TOKEN not in daemon.log()
    assert daemon.terminate(30) == 0, daemon.log()[-3000:]


def stored(text: str) -> float:
    return metric(text, "vidpipe_events_stored_total")


def test_full_disk_is_counted_and_recovers_and_kill_9_keeps_every_acknowledged_event(
    repo_root: Path, assets_dir: Path, tmp_path: Path, run_daemon
) -> None:
    port = free_port()
    config = demo_walkway(repo_root, assets_dir)
    config["http"] = {"port": port}
    config["events"] = {"path": "state/events.db"}  # relative: under the working directory
    daemon = run_daemon(config)
    db = tmp_path / "state" / "events.db"
    wait_for(lambda: stored(scrape_soon(port)) >= 3, 300, "events stored")

    # "disk full": no file of the daemon may grow past its present size (the WAL grows with
    # every commit until a checkpoint, far away at this rate)
    sizes = [p.stat().st_size for p in (db, Path(f"{db}-wal"), daemon.log_path)]
    limit = max(sizes) + 1
    pid = daemon.proc.pid
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    wait_for(
        lambda: metric(scrape(port), "vidpipe_events_write_failures_total") >= 2,
        240,
        "failed event writes counted",
    )
    before = stored(scrape(port))
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    wait_for(lambda: stored(scrape(port)) > before, 60, "the store writing again")

    # kill -9 while it writes: everything acknowledged (counted as stored) must be there
    acknowledged = stored(scrape(port))
    daemon.proc.kill()
    daemon.proc.wait(10)
    text = scrape_soon(port)
    assert text == ""  # really gone
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    finally:
        conn.close()
    assert rows >= acknowledged > before
    print(f"\n{acknowledged:.0f} acknowledged before kill -9, {rows} rows after")
