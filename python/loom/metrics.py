"""CNTK's ``cntk.metrics``: the evaluation criteria, the same functions as the package's top-level
names. CNTK's edit_distance_error and ndcg_at_1 are not in loom (loom.qa ranks answers by MAP and
MRR outside the graph)."""

from ._graph import classification_error

__all__ = ["classification_error"]
