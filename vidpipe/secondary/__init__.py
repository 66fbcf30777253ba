"""Secondary models on crops of tracked objects, and re-identification across cameras.

``build_secondary(cfg, labels_of, metrics)`` gives the result stage (``SecondaryStage``) that
goes after tracking; importing this package registers the ``reid`` embedder type
(``EMBEDDER_TYPES``). Modules: ``embedder`` (the reid model on OpenVINO), ``lane`` (a model's
crop queue and feeder thread), ``gallery`` (matching tracks across cameras), ``stage``,
``build``, ``metrics``.
"""

from vidpipe.secondary.build import build_secondary, crop_rules, open_embedders
from vidpipe.secondary.embedder import ReidEmbedder, open_reid
from vidpipe.secondary.gallery import Gallery, Match
from vidpipe.secondary.stage import CropRule, SecondaryStage

__all__ = [
    "CropRule",
    "Gallery",
    "Match",
    "ReidEmbedder",
    "SecondaryStage",
    "build_secondary",
    "crop_rules",
    "open_embedders",
    "open_reid",
]
