"""CNTK's C.logging: the ProgressPrinter a Trainer (or fit) reports to, over loom's
training/progress.hpp. It writes to sys.stdout."""

from __future__ import annotations

from typing import Optional

from . import _loom
from ._loom import UserError


class ProgressPrinter:
    """Prints a line every ``freq`` minibatches (None: only the epoch lines) and one per epoch
    (trainer.summarize_training_progress()), each starting with ``tag``; ``num_epochs`` shows
    "epoch 3 of 10". loom differs from CNTK: the lines are loom's (loss, metric, samples/s,
    elapsed time); log_to_file, rank, gen_heartbeat and the test and distributed settings are not
    supported (None / their defaults only); the metric is printed as an average, not a percentage."""

    def __init__(self, freq: Optional[int] = None, first: int = 0, tag: str = "", log_to_file=None, rank=None,
                 gen_heartbeat: bool = False, num_epochs: Optional[int] = None, test_freq=None, test_first: int = 0,
                 metric_is_pct: bool = True, distributed_freq=None, distributed_first: int = 0,
                 epoch_size: int = 0):
        if log_to_file is not None:
            raise UserError("ProgressPrinter: log_to_file is not supported by loom (it prints to sys.stdout)")
        if freq is not None and (not isinstance(freq, int) or freq < 0):
            raise UserError(f"ProgressPrinter: freq is a number of minibatches or None; got {freq!r}")
        self._impl = _loom._ProgressPrinter(freq or 0, str(tag), num_epochs or 0, epoch_size)

    def epoch_summary(self, with_metric: bool = False) -> None:
        """Prints the epoch's line and starts the next epoch."""
        self._impl.end_epoch()

    def log(self, message: str) -> None:
        """Prints a line of the caller's."""
        self._impl.note(str(message))


__all__ = ["ProgressPrinter"]
