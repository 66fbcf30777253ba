"""One service per box: ``vidpipe run`` as a supervisor of several daemon processes.

``plan`` decides how many processes a config gets (``inference.processes``) and which
cameras each runs; ``service`` runs them: ``children`` starts, restarts and stops them,
``merge`` and ``proxy`` serve their metrics and pages on one port, ``runtime`` is the control
API's view of the box, ``mps`` handles CUDA MPS, ``child`` is a child's entry point.
"""
