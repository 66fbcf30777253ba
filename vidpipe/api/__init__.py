"""The control API under ``/api/v1``: cameras read, added, changed, paused and removed at
run time, kept as drop-in files (``cameras.d/``) so that a restart runs the same.

``control`` holds the rules (validation, ETags, persistence, the reload it goes through),
``routes`` the HTTP handlers, ``openapi`` the document generated from the config models.
"""

from vidpipe.api.control import CameraControl, ControlError, Runtime
from vidpipe.api.routes import ApiRoutes

__all__ = ["ApiRoutes", "CameraControl", "ControlError", "Runtime"]
