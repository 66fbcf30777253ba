"""``vidpipe bench``: size this machine for vidpipe.

Throughput on looping files (fps, CPU, latency, memory) and, with ``--mode density``, the
largest number of live RTSP cameras vidpipe keeps up with. Every point runs in a fresh
process (``worker``) so that its CPU time, memory and OpenVINO's thread pools are its own.

``common`` (the contender registry, a point's spec, result and meters), ``vidpipe_run``
(the real daemon), ``worker``, ``harness`` (plan and run), ``density``, ``report`` and ``cli``.
The study of the design (other designs, vidpipe's variants, ratios, the GPU rigs) lives in
``benchmarks/``, outside the package, and registers into the harness.
"""
