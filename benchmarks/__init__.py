"""The study of vidpipe's design, outside the product: ``python -m benchmarks``.

``vidpipe bench`` (in the product) measures vidpipe itself: throughput on looping files and,
with ``--mode density``, how many live cameras a machine keeps up with. This package adds to
the same harness, for ``make bench``:

* ``contenders``: ``naive`` (thread per camera, blocking infer), ``single`` (Frigate's single
  detector thread) and ``model_api`` (OpenVINO's ``AsyncPipeline``);
* ``reference``: ``ceiling`` (inference only) and the per-stage CPU costs behind the stage
  bound;
* ``variants``: vidpipe with one setting changed (A/B runs);
* ``study``: the targets, ratios, stage costs and plot of the report;
* ``capture``: the looping file reader and the result log the other designs share.

Importing the package registers them (``vidpipe.bench.common.register_contender``,
``vidpipe.bench.harness.register_extension``); each contender is built in the harness's
worker process from its ``module:callable`` name.

The other modules are rigs of their own, each run as ``python -m benchmarks.<module>``.
"""

from __future__ import annotations

from pathlib import Path

from vidpipe.bench.common import ContenderEntry, register_contender
from vidpipe.bench.harness import register_extension

#: The directory that holds this package: the worker process imports contenders from it.
_ROOT = str(Path(__file__).resolve().parent.parent)


def register() -> None:
    """Register the other designs, vidpipe's variants and the study with the harness.
    Idempotent."""
    from benchmarks.study import Study
    from benchmarks.variants import VARIANTS

    register_contender(ContenderEntry("ceiling", "benchmarks.reference:CeilingRun", _ROOT))
    register_contender(ContenderEntry("naive", "benchmarks.contenders:NaiveRun", _ROOT))
    register_contender(ContenderEntry("single", "benchmarks.contenders:SingleDetectorRun", _ROOT))
    register_contender(ContenderEntry("model_api", "benchmarks.contenders:ModelApiRun", _ROOT))
    for name in VARIANTS:
        factory = "benchmarks.variants:variant_run"
        register_contender(ContenderEntry(name, factory, _ROOT, default=False))
    register_extension(Study())


register()
