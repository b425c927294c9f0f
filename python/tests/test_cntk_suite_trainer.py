"""CNTK's trainer test (cntk/tests/trainer_test.py): a Trainer over a small model, its checkpoint
and the outputs train_minibatch gives back, paraphrased to CNTK 2's Trainer(model, (loss, metric),
learners)."""

import numpy as np

import loom as C


def _trainer():
    in1, labels = C.input_variable(shape=(1,)), C.input_variable(shape=(1,))
    p = C.parameter(shape=(2,), init=10)
    z = C.plus(in1, C.reduce_sum(p), name="z")
    ce = C.cross_entropy_with_softmax(z, labels)
    errs = C.classification_error(z, labels)
    # CNTK's case uses momentum_as_time_constant_schedule(1100); loom's momentum is one constant per update.
    learner = C.momentum_sgd(z.parameters, C.learning_rate_schedule(0.007, C.UnitType.sample),
                             C.momentum_schedule(np.exp(-1 / 1100)))
    return C.Trainer(z, (ce, errs), [learner]), z, in1, labels


def test_trainer_trains_checkpoints_and_restores(tmp_path):
    trainer, z, in1, labels = _trainer()
    updated, values = trainer.train_minibatch({in1: [[1], [2]], labels: [[0], [1]]}, [z.output])
    assert updated is True
    path = str(tmp_path / "checkpoint.dat")
    trainer.save_checkpoint(path)
    trainer.restore_from_checkpoint(path)
    assert trainer.model.name == "z"
    assert isinstance(trainer.model, C.Function)
    assert isinstance(trainer.parameter_learners[0], C.Learner)


def test_train_minibatch_gives_the_outputs_before_the_update():
    trainer, z, in1, labels = _trainer()
    data = np.array([[1.], [2.]], np.float32)
    updated, values = trainer.train_minibatch({in1: data, labels: [[0], [1]]}, [z.output])
    np.testing.assert_allclose(values[z.output], data + 20)
