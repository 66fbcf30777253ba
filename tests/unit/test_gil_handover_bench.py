"""``python -m benchmarks.gil_handover`` runs every variant and reports what it says it does
(a tiny run: the figures themselves are for the machine it runs on, not for a test)."""

from __future__ import annotations

import json

import pytest

from benchmarks.gil_handover import main

VARIANTS = [
    "threads",
    "token:2",
    "baton:2",
    "groups:2",
    "split:2",
    "pipe:2",
    "worker:1",
    "worker:2",
]


@pytest.mark.timeout(120)
def test_every_variant_reports_its_batches_and_frames(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--cameras", "4", "--seconds", "0.8", "--py-us", "20", "--variants", ",".join(VARIANTS)]
    assert main(args) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    head, rows = lines[0], lines[1:]
    assert head["cpu_count"] >= 1 and head["params"]["cameras"] == 4
    assert [r["variant"] for r in rows] == VARIANTS
    for row in rows:
        assert row["batches"] > 0, row
        assert row["frames_per_s"] > 0 and row["due_per_s"] == 100.0, row


def test_an_unknown_variant_is_refused() -> None:
    with pytest.raises(SystemExit, match="unknown variant 'fibers:2'"):
        main(["--seconds", "0.6", "--cameras", "1", "--variants", "fibers:2"])
