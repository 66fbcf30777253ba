"""Per-camera object tracking, zones and lines: a stateful step after postprocessing.

``stage.TrackingStage`` takes each camera's ``FrameResult`` (on the engine's postprocess
thread), gives its detections track ids (``tracker.CameraTracker``, Norfair), turns track
movements into zone and line events (``zones``, pure geometry in ``geometry``), and returns
the result for the next result stage (``vidpipe.stages``). ``draw`` draws zones and lines.
Importing this package is cheap: Norfair is imported only when a camera tracks.
"""
