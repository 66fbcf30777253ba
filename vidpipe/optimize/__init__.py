"""``vidpipe optimize``: an INT8 OpenVINO IR of the configured model, gated by its agreement.

Only this package imports ``nncf`` (the ``vidpipe[optimize]`` extra), and only when the
command runs: the daemon never needs it.
"""
