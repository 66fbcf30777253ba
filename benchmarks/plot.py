"""The PNG plot of a run: fps against cameras per clip, every contender, the ceiling and the
stage bound as horizontal lines (needs matplotlib)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vidpipe.bench.report import measured_clips, pipelines

#: the reference lines of a clip's plot: result key, legend name, line style
_REFERENCE_LINES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("ceiling_fps", "ceiling", {"color": "black", "linestyle": "--", "linewidth": 1}),
    ("stage_bound_fps", "stage bound", {"color": "grey", "linestyle": ":", "linewidth": 1.5}),
)


def plot(doc: dict[str, Any], path: Path, labels: Mapping[str, str]) -> None:
    """fps vs cameras per clip, every contender, ceiling and stage bound as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    clips = measured_clips(doc)
    fig, axes = plt.subplots(1, len(clips), figsize=(5.2 * len(clips), 4.2), squeeze=False)
    for ax, clip in zip(axes[0], clips, strict=True):
        info = doc["clips"][clip]
        for contender in pipelines(doc):
            rows = sorted(
                (
                    r
                    for r in doc["summary"]
                    if r["clip"] == clip and r["contender"] == contender and r["fps"]
                ),
                key=lambda r: r["cameras"],
            )
            if rows:
                ax.plot(
                    [r["cameras"] for r in rows],
                    [r["fps"] for r in rows],
                    marker="o",
                    label=labels.get(contender, contender),  # a stored run's own variant
                    linewidth=2.5 if contender == "vidpipe" else 1.5,
                )
        ref = doc.get("references", {}).get(clip, {})
        for key, name, style in _REFERENCE_LINES:
            if ref.get(key):
                ax.axhline(ref[key], label=f"{name} {ref[key]:.0f}", **style)
        ax.set_title(f"{clip} ({info['width']}x{info['height']})")
        ax.set_xlabel("cameras")
        ax.set_ylabel("frames inferred per second (all cameras)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    m = doc["machine"]
    fig.suptitle(f"{m['cpu_model']}, {m['cores']} cores, precision {doc['precision']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_unavailable() -> str | None:
    """Why no PNG can be drawn (matplotlib missing), or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): no PNG plot"
    return None
