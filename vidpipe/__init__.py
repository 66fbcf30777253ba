"""vidpipe: multi-stream video analytics daemon."""

__version__ = "0.1.0"
