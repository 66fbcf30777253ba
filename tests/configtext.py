"""Config text shared by the config tests."""

MINIMAL = """\
model:
  path: /m.onnx
cameras:
  - name: front
    url: rtsp://10.0.0.2/stream
"""
"""The smallest valid config: a model and one RTSP camera (line 5 is its URL)."""
