"""Event clips with pre-roll and best-shot crops (see ``recorder``).

``ring`` keeps each camera's recent compressed packets (its packet tap), ``recorder`` turns
triggers into clips, ``writer`` writes one clip, ``store`` owns the files on disk.
"""

from vidpipe.clips.recorder import ClipRecorder
from vidpipe.clips.ring import PacketRing, Segment

__all__ = ["ClipRecorder", "PacketRing", "Segment"]
