"""CNTK's submodules (cntk.losses, cntk.metrics, cntk.initializer, cntk.ops) hold the same functions
as the package's top level, so programs that import from them run; every op of the top level is in
ops."""

import numpy as np

import loom as C


def test_losses_metrics_and_initializers_are_the_top_level_functions():
    assert C.losses.cross_entropy_with_softmax is C.cross_entropy_with_softmax
    assert C.losses.squared_error is C.squared_error
    assert C.metrics.classification_error is C.classification_error
    assert C.initializer.glorot_uniform is C.glorot_uniform
    from loom.losses import binary_cross_entropy
    from loom.ops import sequence, times
    assert binary_cross_entropy is C.binary_cross_entropy and times is C.times and sequence is C.sequence


def test_every_top_level_op_is_in_ops_and_each_submodule_lists_what_it_has():
    for module in (C.ops, C.losses, C.metrics, C.initializer):
        for name in module.__all__:
            assert getattr(module, name) is getattr(C, name), name
    ops_like = [n for n in C.__all__ if n in C.ops.__all__]
    assert len(ops_like) == len(C.ops.__all__)


def test_a_program_written_against_the_submodules_trains():
    x = C.input_variable(3)
    y = C.input_variable(2)
    w = C.parameter((3, 2), init=C.initializer.glorot_uniform())
    z = C.ops.times(x, w)
    loss = C.losses.cross_entropy_with_softmax(z, y)
    error = C.metrics.classification_error(z, y)
    trainer = C.Trainer(z, (loss, error), [C.sgd(z.parameters, C.learning_parameter_schedule(0.5))])
    data = {x: np.eye(3, dtype=np.float32)[[0, 1, 2, 0]], y: np.eye(2, dtype=np.float32)[[0, 1, 1, 0]]}
    first = None
    for _ in range(30):
        trainer.train_minibatch(data)
        first = trainer.previous_minibatch_loss_average if first is None else first
    assert trainer.previous_minibatch_loss_average < first
