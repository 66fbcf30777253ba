"""Render a stored result anew: ``python -m benchmarks.report RESULT.json [OUT_DIR]``.

The summary and the study's analyses (references, targets, variants) are recomputed from the
result's raw points, so a report may be newer than the run that made it; the recomputed
result, the Markdown and the PNG plot are written to OUT_DIR (default: beside RESULT.json,
which is then rewritten).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import benchmarks  # noqa: F401  (registers the study: its sections and plot)
from benchmarks.plot import plot_unavailable
from benchmarks.study import REFERENCES
from vidpipe.bench.harness import extensions, summarize
from vidpipe.bench.report import markdown, measured_clips


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not 1 <= len(args) <= 2:
        print("usage: python -m benchmarks.report RESULT.json [OUT_DIR]", file=sys.stderr)
        return 2
    path = Path(args[0])
    doc = json.loads(path.read_text())
    for point in doc["points"]:  # stored before references ran without cameras
        if point["spec"]["contender"] in REFERENCES:
            point["spec"]["cameras"] = 0
    doc["summary"] = summarize(doc["points"])
    for extension in extensions():
        extension.analyse(doc)
    out_dir = Path(args[1]) if len(args) == 2 else path.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    # a stored result is evidence: rewritten in place only when asked to render it in place
    (out_dir / path.name).write_text(json.dumps(doc, indent=1) + "\n")
    (out_dir / f"{path.stem}.md").write_text(markdown(doc))
    if not measured_clips(doc):
        return 0  # density only: nothing to plot
    reason = plot_unavailable()
    if reason:
        print(reason, file=sys.stderr)
        return 1
    for extension in extensions():
        extension.write(doc, out_dir, path.stem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
