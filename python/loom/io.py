"""Reading data into minibatches, as CNTK's ``C.io``: loom's Batcher (data/batching.hpp), which
serves every epoch's minibatches of item indices (shuffled with a seed and the epoch's number,
sorted by length within windows). loom differs from CNTK: no MinibatchSource or readers here; the
Batcher gives indices and the program builds the data (e.g. loom.qa.make_qa_minibatch)."""

from __future__ import annotations

from . import _loom

Batcher = _loom.io.Batcher

__all__ = ["Batcher"]
