"""The daemon imports without OpenVINO: the GPU image has PyTorch and no OpenVINO, so nothing
on the way to ``vidpipe run`` may import it at module level (a CPU embedder or backend imports
it when it opens)."""

from __future__ import annotations

import subprocess
import sys

_BLOCKED = """
import sys

class NoOpenVINO:
    def find_spec(self, name, path=None, target=None):
        if name == "openvino" or name.startswith("openvino."):
            raise ImportError("no OpenVINO here (as on the GPU image)")
        return None

sys.meta_path.insert(0, NoOpenVINO())
import vidpipe.cli, vidpipe.daemon, vidpipe.plan, vidpipe.secondary, vidpipe.secondary.gpu
import vidpipe.web.search, vidpipe.events
print("ok")
"""


def test_the_daemon_imports_without_openvino() -> None:
    proc = subprocess.run([sys.executable, "-c", _BLOCKED], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
