"""Benchmark harness: vidpipe against simpler designs, on the same model, clips and machine.

Modules:

* ``common``: what a measured point is (``PointSpec``), the machine, clips, CPU/RSS meters.
* ``capture``: the looping file reader the baseline contenders share.
* ``contenders``: the baselines (naive, single-detector, model_api).
* ``reference``: the ceiling (inference only) and the per-stage CPU costs.
* ``vidpipe_run``: the real daemon, configured like a user would.
* ``worker``: runs ONE point in a fresh process and writes its result as JSON.
* ``harness``: the plan (suites, alternating repeats) and the child processes.
* ``density``: live RTSP cameras: the largest camera count vidpipe keeps up with.
* ``report``: the Markdown table, the target ratios and the PNG plot.
* ``cli``: the ``vidpipe bench`` subcommand.

Every point runs in its own process so that CPU time, RSS and OpenVINO's thread pools belong
to one contender only.
"""
