"""CNTK's Trainer over loom's training/trainer.hpp, and ``fit`` over loom's fit (training/fit.hpp).

Minibatches run with the GIL released. Ctrl-C: ``train_minibatch`` finishes its minibatch and
KeyboardInterrupt is raised when it returns; ``fit`` checks for a signal between steps, stops, saves
its checkpoint (written whole: a temporary file renamed) and raises KeyboardInterrupt.
"""

from __future__ import annotations

import pickle
from typing import Any, Callable, Optional

from . import _loom
from ._loom import UserError, Variable
from .learners import Learner

_EXTERNAL_STATE = "python.external_state"


def _listed(value, kind, what):
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, kind):
            raise UserError(f"Trainer: {what} holds {kind.__name__}s; got {item!r}")
    return items


class Trainer:
    """CNTK's Trainer(model, criterion, parameter_learners, progress_writers): criterion is the loss or
    (loss, metric); each minibatch runs forward, backward and the learner's update.

    loom differs from CNTK: one learner per Trainer (a list of one is accepted); the loss may be
    summed over any dynamic axes, and the rate unit (mean or summed gradient) is the learner's
    schedule's (loom.learners)."""

    def __init__(self, model, criterion, parameter_learners, progress_writers=None):
        if isinstance(criterion, (tuple, list)):
            if len(criterion) not in (1, 2):
                raise UserError(f"Trainer: criterion is the loss or (loss, metric); got {len(criterion)} items")
            loss, metric = criterion[0], criterion[1] if len(criterion) == 2 else None
        else:
            loss, metric = criterion, None
        if not isinstance(loss, Variable) or (metric is not None and not isinstance(metric, Variable)):
            raise UserError(f"Trainer: the loss and the metric are Variables; got {criterion!r}")
        learners = _listed(parameter_learners, Learner, "parameter_learners")
        if len(learners) != 1:
            raise UserError(f"Trainer: loom's Trainer takes one learner (over all the parameters it trains); "
                            f"got {len(learners)}")
        from .logging import ProgressPrinter
        self._printers = [] if progress_writers is None else _listed(progress_writers, ProgressPrinter,
                                                                      "progress_writers")
        self.model, self.loss_function, self.evaluation_function = model, loss, metric
        self._learner = learners[0]
        self._impl = _loom._Trainer(loss, metric, self._learner._impl, self._learner._average)
        self._learner._trainer = self
        self._last = None

    @property
    def parameter_learners(self) -> list:
        """The learner, as a list of one."""
        return [self._learner]

    def train_minibatch(self, arguments, outputs=None, device=None, is_sweep_end=None):
        """Forward, backward and one update on {input: data}. Returns True when the update was applied
        (False: skipped for a non-finite loss or gradient norm); with outputs=[...], as CNTK, the pair
        (updated, {output: value}) of their values before the update (loom computes them in a forward
        pass of their own, in inference mode)."""
        if outputs is not None:
            wanted = list(outputs)
            values = self.loss_function.eval(arguments, outputs=wanted)
            if len(wanted) == 1:
                values = {wanted[0]: values}
            return self.train_minibatch(arguments, None, device, is_sweep_end), values
        self._learner._before_minibatch(self._impl.total_samples_seen)
        r = self._impl.train_minibatch(arguments)
        self._last = r
        for p in self._printers:
            p._impl.update(r)
        return r.skipped_updates == 0

    def test_minibatch(self, arguments, device=None) -> float:
        """The average metric (the loss without a metric) on {input: data}, in inference mode."""
        r = self._impl.test_minibatch(arguments)
        return r.average_metric if self.evaluation_function is not None else r.average_loss

    @property
    def previous_minibatch_loss_average(self) -> float:
        """The last train_minibatch's loss averaged over its items."""
        return self._last.average_loss if self._last else 0.0

    @property
    def previous_minibatch_evaluation_average(self) -> float:
        """The last train_minibatch's metric averaged over its items."""
        return self._last.average_metric if self._last else 0.0

    @property
    def previous_minibatch_sample_count(self) -> int:
        """The items (or sequence steps) the last train_minibatch's loss was summed over."""
        return self._last.loss_count if self._last else 0

    @property
    def total_number_of_samples_seen(self) -> int:
        """Samples of the minibatches whose update was applied."""
        return self._impl.total_samples_seen

    def summarize_training_progress(self) -> None:
        """Ends the epoch in every progress printer (its summary line)."""
        for p in self._printers:
            p._impl.end_epoch()

    def save_checkpoint(self, filename: str, external_state: Optional[dict] = None) -> None:
        """Parameters, the learner's state, the sample count and the random generators' states in one
        checked file, written to a temporary name and renamed (a run stopped meanwhile leaves the
        previous file). external_state (a dict) is pickled into it."""
        self._impl.save_checkpoint(str(filename), {_EXTERNAL_STATE: pickle.dumps(dict(external_state or {}))})

    def restore_from_checkpoint(self, filename: str) -> dict:
        """Restores what save_checkpoint wrote (training then goes on bit for bit) and returns its
        external_state. A damaged file is a loom.DataError and changes nothing."""
        extras = self._impl.load_checkpoint(str(filename))
        self._learner._last_rate = None  # the checkpoint's learner state may hold another rate
        return pickle.loads(extras[_EXTERNAL_STATE]) if _EXTERNAL_STATE in extras else {}


def fit(trainer: Trainer, source, epochs: int = 1, minibatches_per_epoch: Optional[int] = None,
        samples_per_epoch: int = 0, checkpoint: Optional[str] = None, checkpoint_every: int = 0,
        max_steps: int = 0, evaluate: Optional[Callable[[], Any]] = None, evaluate_every: int = 0,
        patience: int = 0, progress_printer=None, restore_best: bool = True) -> dict:
    """loom's fit: trains ``epochs`` epochs over ``source`` (a list of {input: data} minibatches, the
    same every epoch, or a function (epoch, index) -> {input: data} with minibatches_per_epoch).
    evaluate() (a score, higher is better, or (score, text): fit prints the text for it) runs every
    evaluate_every steps (0: each epoch's end); the best
    parameters are kept and restored (restore_best=False: the last ones stay, e.g. to average them
    with ParameterAverage), patience evaluations without improvement stop early. With a
    checkpoint path, fit saves there at evaluations, every checkpoint_every steps and at the end, and
    resumes from it when it exists (bit for bit, mid-epoch included; the source must give the same
    minibatch for the same (epoch, index)). max_steps stops after that many steps in all.

    Progress goes to progress_printer, else to the trainer's first one. Ctrl-C stops fit between steps
    with KeyboardInterrupt after saving the checkpoint.
    Returns {steps, epochs, epoch_losses, evaluations, best, stopped, resumed}. Not in CNTK (its
    Function.train and TrainingSession play this part)."""
    if not isinstance(trainer, Trainer):
        raise UserError(f"fit: trainer is a loom Trainer; got {trainer!r}")
    if callable(source):
        if minibatches_per_epoch is None or minibatches_per_epoch < 1:
            raise UserError("fit: a source function needs minibatches_per_epoch (at least 1)")
        get = source
    else:
        batches = list(source)
        if not batches:
            raise UserError("fit: the source has no minibatches")
        minibatches_per_epoch = len(batches)
        get = lambda epoch, index: batches[index]  # noqa: E731
    learner = trainer._learner
    learner._last_rate = None  # fit may resume a checkpoint: give the schedule's rate again

    def minibatch(epoch, index):
        learner._before_minibatch(trainer._impl.total_samples_seen)
        return get(epoch, index)

    from .logging import ProgressPrinter
    if progress_printer is None and trainer._printers:
        progress_printer = trainer._printers[0]
    if progress_printer is not None and not isinstance(progress_printer, ProgressPrinter):
        raise UserError(f"fit: progress_printer is a loom.logging.ProgressPrinter; got {progress_printer!r}")
    return trainer._impl.fit(minibatch, minibatches_per_epoch, samples_per_epoch, epochs, str(checkpoint or ""),
                             checkpoint_every, max_steps, evaluate, evaluate_every, patience,
                             progress_printer._impl if progress_printer is not None else None, bool(restore_best))


# The mean of parameters over points of a run (training/averaging.hpp), bound in python/src/qa.cpp.
ParameterAverage = _loom.ParameterAverage

__all__ = ["ParameterAverage", "Trainer", "fit"]
