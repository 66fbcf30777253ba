"""``/metrics`` of a supervised box: every child's registry, scraped and merged, each series
with the ``shard`` label of the child it came from, plus the supervisor's own series.

Why scrape and merge rather than prometheus-client's multiprocess mode: that mode keeps each
process's values in files and sums (or takes the max, or the latest of) gauges across them by
a mode fixed per gauge; a child killed and restarted leaves its files behind until someone
marks it dead, so its ``vidpipe_camera_up`` would linger or be summed with its successor's.
A scrape reads every gauge exactly as the child that owns it holds it now: a dead child's
series are simply absent until its successor serves them, and a restarted child's counters
start again from 0 under the same ``shard`` label, which Prometheus reads as a counter reset
(``rate`` and ``increase`` handle it). It also needs nothing of the metric definitions:
``vidpipe.metrics`` stays one registry per pipeline.
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from vidpipe.supervisor.children import Children

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT_S = 5.0


def fetch(port: int, path: str, token: str | None, timeout_s: float = SCRAPE_TIMEOUT_S) -> bytes:
    """GET ``path`` from a child's loopback server (with the box's token, if any)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return bytes(resp.read())


def merge_families(texts: Iterable[tuple[int, str]]) -> list[Metric]:
    """The families of several expositions, each sample labelled ``shard=<index>``; one
    family per name (its help and type from the first child that has it)."""
    merged: dict[str, Metric] = {}
    for index, text in texts:
        for family in text_string_to_metric_families(text):
            target = merged.get(family.name)
            if target is None:
                target = Metric(family.name, family.documentation, family.type, family.unit)
                merged[family.name] = target
            target.samples.extend(
                s._replace(labels={**s.labels, "shard": str(index)}) for s in family.samples
            )
    return list(merged.values())


class MergedMetrics(Collector):
    """The collector behind the supervisor's ``/metrics`` (see the module docstring).

    Args:
        children: the supervised processes (their ports, their restarts).
        token: the bearer token the children's servers want (admin token or read token).
    """

    def __init__(self, children: Children, token: str | None) -> None:
        self.children = children
        self.token = token
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def collect(self) -> Iterator[Metric]:
        yield from self._own()
        yield from merge_families(self._scrape_all())

    def _scrape_all(self) -> list[tuple[int, str]]:
        ports = sorted(self.children.serving().items())  # cameras stream before READY
        if not ports:
            return []
        # in parallel: one slow child must not add its delay to every other's
        with ThreadPoolExecutor(len(ports), thread_name_prefix="vidpipe-scrape") as pool:
            texts = list(pool.map(lambda item: self._scrape(*item), ports))
        return [(i, t) for (i, _), t in zip(ports, texts, strict=True) if t is not None]

    def _scrape(self, index: int, port: int) -> str | None:
        try:
            return fetch(port, "/metrics", self.token).decode()
        except OSError as exc:  # it died between ports() and now: absent from this scrape
            log.warning("shard %d: /metrics scrape failed: %s", index, exc)
            return None

    def _own(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            "vidpipe_process_up",
            "1 while the shard's process is ready (vidpipe run with inference.processes > 1)",
            labels=["shard"],
        )
        restarts = CounterMetricFamily(
            "vidpipe_process_restarts",
            "Times the supervisor restarted a shard's process after it exited or hung",
            labels=["shard"],
        )
        ready = self.children.ports()
        for child in self.children.slots:
            up.add_metric([str(child.index)], 1.0 if child.index in ready else 0.0)
            restarts.add_metric([str(child.index)], float(child.restarts))
        return (up, restarts)


def scrape_json(
    children: Children, path: str, token: str | None, parse: Callable[[bytes], object]
) -> dict[int, object]:
    """``shard index -> parse(body)`` of ``GET path`` on every ready child (failures left out)."""
    out: dict[int, object] = {}
    for index, port in sorted(children.ports().items()):
        try:
            out[index] = parse(fetch(port, path, token))
        except (OSError, ValueError) as exc:
            log.warning("shard %d: GET %s failed: %s", index, path, exc)
    return out
