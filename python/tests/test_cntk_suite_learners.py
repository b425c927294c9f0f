"""CNTK's learner tests (cntk/tests/learner_test.py): schedules and learners' construction,
paraphrased to the signatures of CNTK 2.2 and later that loom follows."""

import math

import numpy as np
import pytest

import loom as C

SCHEDULES = [
    ((0.2,), {}, [0.2]),
    ((0.2,), {}, [0.2, 0.2, 0.2, 0.2]),
    (([0.2, 0.4],), {"epoch_size": 5}, [0.2] * 5 + [0.4] * 20),
    (([(3, 0.2), (2, 0.4), (1, 0.8)],), {"epoch_size": 5}, [0.2] * 15 + [0.4] * 10 + [0.8] * 20),
]


@pytest.mark.parametrize("args, keywords, expected", SCHEDULES)
def test_learning_rate_schedules_by_sample(args, keywords, expected):
    for make in (C.learning_parameter_schedule, C.learning_parameter_schedule_per_sample):
        schedule = make(*args, **keywords)
        assert [schedule[i] for i in range(len(expected))] == expected
    schedule = C.learning_rate_schedule(*args, C.UnitType.sample, **keywords)
    assert [schedule[i] for i in range(len(expected))] == expected


def test_a_schedule_of_several_values_needs_its_epoch_size():
    # CNTK lets each entry last a sweep of the data; loom has no sweep to count and asks for epoch_size.
    with pytest.raises(C.UserError, match="epoch_size"):
        C.learning_parameter_schedule([0.1, 0.2])


def test_momentum_schedules():
    assert C.momentum_schedule(0.9)[0] == 0.9
    # loom's momentum is one constant per update: CNTK's time constant converts for a minibatch size.
    with pytest.raises(C.UserError, match="momentum_schedule\\(math.exp"):
        C.momentum_as_time_constant_schedule(2500)
    assert math.isclose(C.momentum_schedule(math.exp(-1.0 / 2500))[0], np.exp(-1.0 / 2500))


def test_learners_are_made_with_cntk_signatures():
    i = C.input_variable(shape=(1,), needs_gradient=True, name="a")
    w = C.parameter(shape=(1,))
    res = i * w
    learner = C.sgd(res.parameters, lr=C.learning_parameter_schedule_per_sample(0.1))
    assert learner.learning_rate() == 0.1
    assert isinstance(learner.parameters[0], C.Parameter)
    # (CNTK resets it to a per-minibatch schedule; loom keeps the learner's unit, per sample here.)
    learner.reset_learning_rate(C.learning_parameter_schedule_per_sample([1, 2, 3], epoch_size=100))
    assert learner.learning_rate() == 1
    C.momentum_sgd(res.parameters, 0.1, C.momentum_schedule(0.9))
    C.nesterov(res.parameters, lr=C.learning_parameter_schedule([0.1, 0.2], epoch_size=10),
               momentum=C.momentum_schedule(0.9))
    C.adagrad(res.parameters, lr=C.learning_parameter_schedule([0.1] * 3 + [0.2] * 2 + [0.3], epoch_size=10),
              need_ave_multiplier=True)
    C.adam(res.parameters, lr=C.learning_parameter_schedule([(3, 0.1), (2, 0.2), (1, 0.3)], epoch_size=10),
           momentum=C.momentum_schedule(0.9))
    gamma, inc, dec, largest, smallest = [0.1] * 5
    C.rmsprop(res.parameters, C.learning_parameter_schedule([0.1, 0.2], epoch_size=100), gamma, inc, dec, largest,
              smallest, True)


def test_sgd_moves_a_parameter_against_its_gradient():
    # CNTK's learner.update: one step of lr * gradient; here through a Trainer on the same model.
    i = C.input_variable(shape=(1,), dtype=np.float64)
    w = C.parameter(shape=(1,), init=1.0, dtype=np.float64)
    res = C.reduce_sum(i * w)
    trainer = C.Trainer(res, (res, res), [C.sgd(res.parameters, lr=C.learning_parameter_schedule(0.1))])
    trainer.train_minibatch({i: np.array([[2.]])})
    np.testing.assert_allclose(w.value, [1.0 - 0.1 * 2.0])
