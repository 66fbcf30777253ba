"""The one quantile rule of the project: nearest rank over sorted values.

Latency figures (the benchmark's p50 and p95, the status page's) all use it, so that two
figures of the same data never differ by the rule that computed them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def quantile(sorted_values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0-1) of already sorted values, nearest rank; None when empty."""
    if not sorted_values:
        return None
    rank = max(0, min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[rank])


def quantile_of(values: Iterable[float], q: float) -> float | None:
    """``quantile`` of values in any order."""
    return quantile(sorted(values), q)


def bucket_quantile(
    before: dict[float, float], after: dict[float, float], q: float
) -> float | None:
    """The ``q`` quantile of the observations between two snapshots of a Prometheus
    histogram's cumulative buckets (upper bound -> count): the upper bound of the bucket it
    falls in; None without observations."""
    edges = sorted(after)
    counts = [after[e] - before.get(e, 0.0) for e in edges]
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return None
    for edge, cumulative in zip(edges, counts, strict=True):
        if cumulative >= q * total:
            return edge
    return edges[-1]
