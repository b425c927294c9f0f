"""Learners and their schedules under CNTK's names (``C.sgd``, ``C.adam``,
``C.learning_parameter_schedule``, ...), over loom's training/learners.hpp.

Rate units. CNTK applies a rate either to the minibatch's mean gradient (``learning_parameter_schedule``
without ``minibatch_size``, ``learning_rate_schedule(..., UnitType.minibatch)``, a plain number) or to
its summed gradient (``learning_rate_schedule(..., UnitType.sample)``: a per-sample rate). loom's
Trainer does the same through ``TrainerOptions::average_gradients``: the learner's schedule decides,
and the Trainer averages the gradient or not. ``learning_parameter_schedule(lr, minibatch_size=k)``
(a rate meant for the mean over k samples) becomes the per-sample rate lr / k on the sum, as CNTK
scales it. loom's own schedules (``warmup_cosine_decay``, ...) are functions of the update's number
and apply to the mean gradient.

CNTK schedules are indexed by samples seen (``s[1200]``); a list needs ``epoch_size`` (samples per
entry) in loom, which has no data sweep to count when training minibatch by minibatch. Momentum-like
constants are per update and constant (a schedule of one value).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Union

from . import _loom
from ._loom import (LearningRate, UserError, constant_rate, exponential_decay, step_decay, warmup_cosine_decay,
                    warmup_linear_decay)


class UnitType:
    """CNTK's units of a rate: per ``sample`` (applied to the summed gradient) or per ``minibatch``
    (applied to the mean gradient)."""
    sample = "sample"
    minibatch = "minibatch"


class Schedule:
    """A value as a function of the number of samples seen, as CNTK's training_parameter_schedule:
    ``s[n]`` is the value for the minibatch that starts after n samples. Each entry lasts
    ``count * epoch_size`` samples; the last one lasts for ever."""

    def __init__(self, entries, epoch_size: int, unit: str, minibatch_size: Optional[int], what: str):
        self.entries = entries  # [(count, value)]
        self.epoch_size = epoch_size
        self.unit = unit
        self.minibatch_size = minibatch_size
        self.what = what

    def __getitem__(self, samples: int) -> float:
        end = 0
        for count, value in self.entries:
            end += count * self.epoch_size
            if samples < end:
                return value
        return self.entries[-1][1]

    def is_constant(self) -> bool:
        """Whether the schedule has one value."""
        return len(self.entries) == 1

    @property
    def averages(self) -> bool:
        """Whether the rate applies to the minibatch's mean gradient (else to the sum)."""
        return self.unit == UnitType.minibatch and self.minibatch_size is None

    def rate_at(self, samples: int) -> float:
        """The per-update rate loom's learner uses after ``samples`` samples (see the module's units)."""
        value = self[samples]
        return value / self.minibatch_size if self.minibatch_size else value

    def __repr__(self) -> str:
        return f"<loom.learners.Schedule {self.what} {self.entries} epoch_size={self.epoch_size} unit={self.unit}>"


def _schedule(values, epoch_size, unit, minibatch_size, what) -> Schedule:
    if isinstance(values, Schedule):
        return values
    if isinstance(values, (int, float)):
        entries = [(1, float(values))]
    else:
        try:
            items = list(values)
        except TypeError:
            raise UserError(f"{what}: takes a number or a list of numbers or of (count, value) pairs; got {values!r}")
        if not items:
            raise UserError(f"{what}: the list of values is empty")
        if epoch_size is None and len(items) > 1:
            raise UserError(f"{what}: a list of values needs epoch_size (the samples each entry lasts); loom has "
                            "no data sweep to count (CNTK's default)")
        entries = []
        for item in items:
            count, value = item if isinstance(item, (tuple, list)) else (1, item)
            if not isinstance(count, int) or count < 1:
                raise UserError(f"{what}: the count of ({count}, {value}) is a positive integer")
            entries.append((count, float(value)))
    for _, value in entries:
        if not math.isfinite(value) or value < 0:
            raise UserError(f"{what}: values are finite and not negative; got {value}")
    if minibatch_size is not None and (not isinstance(minibatch_size, int) or minibatch_size < 1):
        raise UserError(f"{what}: minibatch_size is a positive integer or None; got {minibatch_size!r}")
    return Schedule(entries, epoch_size or 1, unit, minibatch_size, what)


def learning_parameter_schedule(schedule, minibatch_size: Optional[int] = None,
                                epoch_size: Optional[int] = None) -> Schedule:
    """CNTK's learning rate schedule: a number, a list of numbers or of (count, value) pairs, each
    entry lasting count * epoch_size samples. Without minibatch_size the rate applies to the
    minibatch's mean gradient; with it, to the mean over minibatch_size samples (loom: the per-sample
    rate value / minibatch_size on the summed gradient, as CNTK scales it). loom: a list needs
    epoch_size."""
    return _schedule(schedule, epoch_size, UnitType.minibatch, minibatch_size, "learning_parameter_schedule")


def learning_parameter_schedule_per_sample(schedule, epoch_size: Optional[int] = None) -> Schedule:
    """CNTK's per-sample rate: learning_parameter_schedule(schedule, minibatch_size=1), the value applied
    to the minibatch's summed gradient."""
    return _schedule(schedule, epoch_size, UnitType.minibatch, 1, "learning_parameter_schedule_per_sample")


def learning_rate_schedule(lr, unit: str, epoch_size: Optional[int] = None) -> Schedule:
    """CNTK's older rate schedule with an explicit unit: UnitType.sample (a per-sample rate, applied to
    the summed gradient) or UnitType.minibatch (applied to the mean gradient)."""
    if unit not in (UnitType.sample, UnitType.minibatch):
        raise UserError(f"learning_rate_schedule: unit is UnitType.sample or UnitType.minibatch; got {unit!r}")
    return _schedule(lr, epoch_size, unit, None, "learning_rate_schedule")


def momentum_schedule(momentum, epoch_size: Optional[int] = None, minibatch_size: Optional[int] = None) -> Schedule:
    """CNTK's momentum schedule. loom's momentum is one constant per update: a list of values, or a
    minibatch_size (CNTK's rescaling to the minibatch's size), is a UserError."""
    s = _schedule(momentum, epoch_size, UnitType.minibatch, None, "momentum_schedule")
    if not s.is_constant() or minibatch_size is not None:
        raise UserError("momentum_schedule: loom's momentum is one constant per update; give a number "
                        f"(got {momentum!r}, minibatch_size={minibatch_size!r})")
    if s[0] >= 1:
        raise UserError(f"momentum_schedule: momentum is below 1; got {s[0]}")
    return s


def momentum_as_time_constant_schedule(momentum, epoch_size: Optional[int] = None):
    """CNTK's momentum as a time constant in samples (per-sample momentum exp(-1 / tc)). Not in loom,
    whose momentum is one constant per update: a UserError that gives the per-update value to pass
    instead, momentum_schedule(exp(-minibatch_size / time_constant))."""
    raise UserError(f"momentum_as_time_constant_schedule({momentum!r}): loom's momentum is one constant per update; "
                    "pass momentum_schedule(math.exp(-minibatch_size / time_constant)) for your minibatch size")


def _constant(value, what: str) -> float:
    if isinstance(value, Schedule):
        if not value.is_constant():
            raise UserError(f"{what}: loom's {what} is one constant per update; got a schedule of "
                            f"{len(value.entries)} values")
        return value[0]
    if not isinstance(value, (int, float)):
        raise UserError(f"{what}: takes a number or a momentum_schedule of one value; got {value!r}")
    return float(value)


class Learner:
    """A learner (an update rule, its parameters and its state), made by C.sgd, C.adam, ...; given to
    one Trainer. loom's learner updates all its parameters with one global gradient-norm clip."""

    def __init__(self, impl, rate, average: bool):
        self._impl = impl
        self._rate = rate  # a Schedule (indexed by samples) or None (a LearningRate inside impl)
        self._average = average
        self._trainer = None  # the Trainer it was given to
        self._last_rate = None  # the rate _before_minibatch last gave impl (None: unknown, set it again)
        self._factor = 1.0  # unit gain's 1 - momentum: loom's rule runs with rate * factor

    @property
    def parameters(self) -> list:
        """The parameters this learner updates."""
        return self._impl.parameters

    def learning_rate(self) -> float:
        """The rate of the next update: the schedule's value at the samples seen so far, as CNTK gives
        it (before unit gain's 1 - momentum or a minibatch_size's division); for a loom LearningRate,
        its value at the next update."""
        if self._rate is not None:
            seen = self._trainer.total_number_of_samples_seen if self._trainer is not None else 0
            return self._rate[seen]
        return self._impl.learning_rate()

    def reset_learning_rate(self, learning_rate) -> None:
        """Replaces the schedule (a number, a Schedule of the same unit, or a loom LearningRate)."""
        rate, average, start = _rate_of(learning_rate, None, None, "reset_learning_rate")
        if average != self._average:
            raise UserError("reset_learning_rate: the new schedule's unit (per sample or per minibatch) differs from "
                            "the learner's; loom's Trainer fixed it when it was made")
        self._rate = rate
        self._given_rate = start
        self._set_rate(rate if rate is not None else start)

    def _set_rate(self, rate) -> None:
        """Gives loom's learner `rate` (a Schedule: its value now; a LearningRate) times the factor."""
        self._last_rate = None
        if isinstance(rate, Schedule):
            seen = self._trainer.total_number_of_samples_seen if self._trainer is not None else 0
            self._impl.set_learning_rate(rate.rate_at(seen) * self._factor)
        elif self._factor == 1.0:
            self._impl.set_learning_rate(rate)
        else:  # a function of the step, scaled in Python (called once per update)
            factor = self._factor
            self._impl.set_learning_rate(LearningRate(lambda step: rate(step) * factor))

    def _before_minibatch(self, samples_seen: int) -> None:
        if self._rate is not None:
            rate = self._rate.rate_at(samples_seen) * self._factor
            # Set only when it changes: a new rate each step costs some 50 us (2 % of a small model's step).
            if rate != self._last_rate:
                self._impl.set_learning_rate(rate)
                self._last_rate = rate

    def __repr__(self) -> str:
        return f"<loom.Learner {self._impl.name} over {len(self.parameters)} parameters>"


def _rate_of(lr, minibatch_size, epoch_size, what):
    """(Schedule or None, averages, the first rate) of a learner's lr argument."""
    if isinstance(lr, LearningRate):
        return None, True, lr
    if callable(lr) and not isinstance(lr, Schedule):
        return None, True, LearningRate(lr)
    s = lr if isinstance(lr, Schedule) else _schedule(lr, epoch_size, UnitType.minibatch, minibatch_size, what)
    if isinstance(lr, Schedule) and minibatch_size is not None:
        s = Schedule(s.entries, s.epoch_size, s.unit, minibatch_size, s.what)
    return s, s.averages, LearningRate(s.rate_at(0))


def _make(rule, what, parameters, lr, constants, l1, l2, noise, clip, use_mean_gradient, minibatch_size, epoch_size,
          lazy_sparse_rows=False):
    if l1:
        raise UserError(f"{what}: loom has no L1 regularization; l1_regularization_weight must be 0 (got {l1})")
    if noise:
        raise UserError(f"{what}: loom has no gaussian noise injection; gaussian_noise_injection_std_dev must be 0 "
                        f"(got {noise})")
    if l2 < 0:
        raise UserError(f"{what}: l2_regularization_weight must not be negative; got {l2}")
    if not clip > 0:
        raise UserError(f"{what}: gradient_clipping_threshold_per_sample must be positive (inf: none); got {clip}")
    schedule, average, start = _rate_of(lr, minibatch_size, epoch_size, what)
    if use_mean_gradient:
        average = True
    impl = rule(parameters, start, *constants, l2=float(l2), clip=0.0 if math.isinf(clip) else float(clip),
                lazy_sparse_rows=bool(lazy_sparse_rows))
    learner = Learner(impl, schedule, average)
    learner._given_rate = start
    return learner


_CLIP_NOTE = """
    loom's gradient_clipping_threshold_per_sample rescales all the learner's gradients together so
    that their global L2 norm is at most the threshold (gradient_clipping_with_truncation is
    ignored); CNTK truncates or rescales per parameter. l1 regularization and gaussian noise are not
    in loom (a nonzero value is a UserError)."""


def sgd(parameters, lr, l1_regularization_weight=0.0, l2_regularization_weight=0.0,
        gaussian_noise_injection_std_dev=0.0, gradient_clipping_threshold_per_sample=math.inf,
        gradient_clipping_with_truncation=True, use_mean_gradient=None, minibatch_size=None,
        epoch_size=None) -> Learner:
    """Plain SGD: w -= lr * g, g the mean gradient (or the sum for a per-sample rate)."""
    return _make(_loom._sgd, "sgd", parameters, lr, (), l1_regularization_weight, l2_regularization_weight,
                 gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample, use_mean_gradient,
                 minibatch_size, epoch_size)


def momentum_sgd(parameters, lr, momentum, unit_gain=True, l1_regularization_weight=0.0,
                 l2_regularization_weight=0.0, gaussian_noise_injection_std_dev=0.0,
                 gradient_clipping_threshold_per_sample=math.inf, gradient_clipping_with_truncation=True,
                 use_mean_gradient=None, minibatch_size=None, epoch_size=None) -> Learner:
    """SGD with momentum. unit_gain (CNTK's default): v = m v + (1 - m) g, w -= lr v; else
    v = m v + g. loom's rule is the latter, so unit gain runs it with lr * (1 - m), the same steps."""
    m = _constant(momentum, "momentum")
    learner = _make(_loom._momentum_sgd, "momentum_sgd", parameters, lr, (m,), l1_regularization_weight,
                    l2_regularization_weight, gaussian_noise_injection_std_dev,
                    gradient_clipping_threshold_per_sample, use_mean_gradient, minibatch_size, epoch_size)
    return _unit_gain(learner, m) if unit_gain else learner


def nesterov(parameters, lr, momentum, unit_gain=True, l1_regularization_weight=0.0,
             l2_regularization_weight=0.0, gaussian_noise_injection_std_dev=0.0,
             gradient_clipping_threshold_per_sample=math.inf, gradient_clipping_with_truncation=True,
             use_mean_gradient=None, minibatch_size=None, epoch_size=None) -> Learner:
    """Nesterov momentum (loom: v = m v + g, w -= lr (g + m v), as torch.optim.SGD(nesterov=True));
    unit_gain scales the rate by (1 - m) as momentum_sgd's."""
    m = _constant(momentum, "momentum")
    learner = _make(_loom._nesterov, "nesterov", parameters, lr, (m,), l1_regularization_weight,
                    l2_regularization_weight, gaussian_noise_injection_std_dev,
                    gradient_clipping_threshold_per_sample, use_mean_gradient, minibatch_size, epoch_size)
    return _unit_gain(learner, m) if unit_gain else learner


def _unit_gain(learner: Learner, m: float) -> Learner:
    learner._factor = 1.0 - m
    learner._set_rate(learner._rate if learner._rate is not None else learner._given_rate)
    return learner


def adagrad(parameters, lr, need_ave_multiplier=True, l1_regularization_weight=0.0, l2_regularization_weight=0.0,
            gaussian_noise_injection_std_dev=0.0, gradient_clipping_threshold_per_sample=math.inf,
            gradient_clipping_with_truncation=True, use_mean_gradient=None, minibatch_size=None,
            epoch_size=None, epsilon=1e-8) -> Learner:
    """AdaGrad: G += g^2, w -= lr g / (sqrt(G) + epsilon). need_ave_multiplier (CNTK's) is ignored."""
    return _make(_loom._adagrad, "adagrad", parameters, lr, (epsilon,), l1_regularization_weight,
                 l2_regularization_weight, gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample,
                 use_mean_gradient, minibatch_size, epoch_size)


def rmsprop(parameters, lr, gamma=0.9, inc=1.2, dec=0.75, max=10.0, min=0.1, need_ave_multiplier=True,
            l1_regularization_weight=0.0, l2_regularization_weight=0.0, gaussian_noise_injection_std_dev=0.0,
            gradient_clipping_threshold_per_sample=math.inf, gradient_clipping_with_truncation=True,
            use_mean_gradient=None, minibatch_size=None, epoch_size=None, epsilon=1e-8) -> Learner:
    """RMSProp as torch.optim.RMSprop: S = gamma S + (1 - gamma) g^2, w -= lr g / (sqrt(S) + epsilon).
    loom differs from CNTK: CNTK's rmsprop also adapts a per-element step between min and max by inc
    and dec; loom has no such scale (inc, dec, max, min and need_ave_multiplier are ignored)."""
    return _make(_loom._rmsprop, "rmsprop", parameters, lr, (gamma, epsilon), l1_regularization_weight,
                 l2_regularization_weight, gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample,
                 use_mean_gradient, minibatch_size, epoch_size)


def adam(parameters, lr, momentum, unit_gain=True, variance_momentum=None, l1_regularization_weight=0.0,
         l2_regularization_weight=0.0, gaussian_noise_injection_std_dev=0.0,
         gradient_clipping_threshold_per_sample=math.inf, gradient_clipping_with_truncation=True,
         use_mean_gradient=None, epsilon=1e-8, adamax=False, minibatch_size=None, epoch_size=None,
         lazy_sparse_rows=False) -> Learner:
    """Adam (Kingma and Ba) with bias correction: beta1 = momentum, beta2 = variance_momentum, both per
    update. loom differs from CNTK: variance_momentum defaults to 0.999 per update (CNTK's default is
    per sample); unit_gain=False and adamax are not in loom (a UserError). lazy_sparse_rows (loom's, as
    lazy Adam): a row of a parameter (an embedding vector) whose gradient is all zero keeps its moments
    and weights, instead of decaying and moving on old momentum; it saves the work for the rows a
    minibatch does not touch."""
    if not unit_gain:
        raise UserError("adam: loom's Adam is unit-gain (m = b1 m + (1 - b1) g); unit_gain=False is not supported")
    if adamax:
        raise UserError("adam: loom has no AdaMax; adamax must be False")
    beta2 = 0.999 if variance_momentum is None else _constant(variance_momentum, "variance_momentum")
    return _make(_loom._adam, "adam", parameters, lr, (_constant(momentum, "momentum"), beta2, epsilon),
                 l1_regularization_weight, l2_regularization_weight, gaussian_noise_injection_std_dev,
                 gradient_clipping_threshold_per_sample, use_mean_gradient, minibatch_size, epoch_size,
                 lazy_sparse_rows)


def adamw(parameters, lr, beta1=0.9, beta2=0.999, epsilon=1e-8, weight_decay=0.01,
          gradient_clipping_threshold_per_sample=math.inf, minibatch_size=None, epoch_size=None,
          decay_matrices_only=False) -> Learner:
    """loom's: Adam with decoupled weight decay (torch.optim.AdamW): w *= 1 - lr weight_decay, then
    Adam's step. decay_matrices_only: only parameters of rank 2 and more decay (weight matrices and
    embedding tables; biases and norms' gains do not), as nanoGPT's two parameter groups. Not in CNTK."""
    return _make(_loom._adamw, "adamw", parameters, lr,
                 (beta1, beta2, epsilon, weight_decay, bool(decay_matrices_only)), 0.0, 0.0, 0.0,
                 gradient_clipping_threshold_per_sample, None, minibatch_size, epoch_size)


def adadelta(parameters, lr=1.0, rho=0.95, epsilon=1e-8, l1_regularization_weight=0.0,
             l2_regularization_weight=0.0, gaussian_noise_injection_std_dev=0.0,
             gradient_clipping_threshold_per_sample=math.inf, gradient_clipping_with_truncation=True,
             use_mean_gradient=None, minibatch_size=None, epoch_size=None) -> Learner:
    """AdaDelta (Zeiler), as CNTK's and torch.optim.Adadelta."""
    return _make(_loom._adadelta, "adadelta", parameters, lr, (rho, epsilon), l1_regularization_weight,
                 l2_regularization_weight, gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample,
                 use_mean_gradient, minibatch_size, epoch_size)


def fsadagrad(parameters, lr, momentum, unit_gain=True, variance_momentum=None, l1_regularization_weight=0.0,
              l2_regularization_weight=0.0, gaussian_noise_injection_std_dev=0.0,
              gradient_clipping_threshold_per_sample=math.inf, gradient_clipping_with_truncation=True,
              use_mean_gradient=None, minibatch_size=None, epoch_size=None) -> Learner:
    """CNTK's FSAdaGrad. loom differs: variance_momentum (default 0.999) is per update, not per sample."""
    vm = 0.999 if variance_momentum is None else _constant(variance_momentum, "variance_momentum")
    return _make(_loom._fsadagrad, "fsadagrad", parameters, lr, (_constant(momentum, "momentum"), vm, bool(unit_gain)),
                 l1_regularization_weight, l2_regularization_weight, gaussian_noise_injection_std_dev,
                 gradient_clipping_threshold_per_sample, use_mean_gradient, minibatch_size, epoch_size)


for _f in (sgd, momentum_sgd, nesterov, adagrad, rmsprop, adam, adadelta, fsadagrad):
    _f.__doc__ += _CLIP_NOTE

__all__ = [
    "Learner", "LearningRate", "Schedule", "UnitType", "adadelta", "adagrad", "adam", "adamw", "constant_rate",
    "exponential_decay", "fsadagrad", "learning_parameter_schedule", "learning_parameter_schedule_per_sample",
    "learning_rate_schedule", "momentum_as_time_constant_schedule", "momentum_schedule", "momentum_sgd", "nesterov",
    "rmsprop", "sgd", "step_decay", "warmup_cosine_decay", "warmup_linear_decay",
]
