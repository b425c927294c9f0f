"""CNTK's ``cntk.losses``: the training criteria, the same functions as the package's top-level names
(``C.losses.cross_entropy_with_softmax is C.cross_entropy_with_softmax``). CNTK's other losses
(lambda_rank, nce_loss, hinge_loss, weighted_binary_cross_entropy,
cosine_distance_with_negative_samples) are not in loom."""

from ._graph import cross_entropy_with_softmax
from ._loom import binary_cross_entropy, cosine_distance, squared_error

__all__ = ["binary_cross_entropy", "cosine_distance", "cross_entropy_with_softmax", "squared_error"]
