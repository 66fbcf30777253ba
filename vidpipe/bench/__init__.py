"""Benchmark harness: what users run to measure vidpipe on their own machine.

* ``vidpipe bench``: vidpipe on looping files (fps, CPU, latency, steady-state memory), and
  with ``--mode density`` the largest number of live RTSP cameras it keeps up with (sizing).
* ``vidpipe bench-gpu``: the GPU stream set against its executor in a tight loop.

The designs vidpipe is compared with (naive loop, single detector, model_api, the inference
ceiling) live outside the package, in ``benchmarks/``, and register into this harness
(``python -m benchmarks``, ``make bench``).

Modules:

* ``common``: what a measured point is (``PointSpec``), the contender registry, the machine,
  clips, CPU/RSS meters.
* ``vidpipe_run``: the real daemon, configured like a user would; ``variants``: its A/B
  variants (a feature on in every camera).
* ``worker``: runs ONE point in a fresh process and writes its result as JSON.
* ``harness``: the plan (suites, alternating repeats) and the child processes.
* ``density``: live RTSP cameras: the largest camera count vidpipe keeps up with.
* ``report``: the Markdown table, the target ratios and the PNG plot.
* ``benchmark_app``: OpenVINO's ``benchmark_app`` as a cross-check.
* ``gpu``: ``vidpipe bench-gpu``.
* ``cli``: the ``vidpipe bench`` and ``vidpipe bench-gpu`` subcommands.

Every point runs in its own process so that CPU time, RSS and OpenVINO's thread pools belong
to one contender only.
"""
