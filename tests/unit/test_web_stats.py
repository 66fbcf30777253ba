"""``registry_stats``: every registry sample as JSON, grouped by camera, sink and pipeline."""

from __future__ import annotations

from vidpipe.metrics import Metrics
from vidpipe.web.stats import registry_stats


def test_samples_are_grouped_and_keyed_like_the_exposition() -> None:
    m = Metrics()
    m.camera("a").captured.inc(5)
    m.camera("a").drop("too_old", 2)
    m.camera("a").e2e_latency.observe(0.2)
    m.sink_written.labels(sink="jsonl").inc(9)
    m.model("m").pool_size.set(4)
    m.inference_info.labels(
        backend="openvino", device="CPU", precision="f32", hint="throughput", model="m"
    ).set(1)
    stats = registry_stats(m.registry)
    a = stats["cameras"]["a"]
    assert a["frames_captured_total"] == 5.0
    assert (
        a["frames_dropped_total"]["too_old"] == 2.0 and a["frames_dropped_total"]["shutdown"] == 0
    )
    assert a["end_to_end_latency_seconds_count"] == 1.0
    assert a["end_to_end_latency_seconds_sum"] == 0.2
    assert not any(k.endswith(("_bucket", "_created")) for k in a)
    assert stats["sinks"]["jsonl"]["sink_written_total"] == 9.0
    assert stats["pipeline"]["pool_size"] == {"m": 4.0}  # by model
    (info,) = stats["pipeline"]["inference_info"]  # several labels: a record with its value
    assert info == {
        "backend": "openvino",
        "device": "CPU",
        "precision": "f32",
        "hint": "throughput",
        "model": "m",
        "value": 1.0,
    }
