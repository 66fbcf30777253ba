"""``python -m benchmarks [vidpipe bench options]``: ``vidpipe bench`` with the peer contenders.

``make bench`` runs ``python -m benchmarks --suite full --out benchmarks/results``.
"""

from __future__ import annotations

import sys

import benchmarks  # noqa: F401  (registers the peer contenders)
from vidpipe.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
