"""CNTK's initializer test (cntk/tests/initializer_test.py): each initializer's values are centred
and spread, on a parameter [10, 20, 5]; CNTK's keywords taken."""

import numpy as np
import pytest

import loom as C


def _check(init):
    p = C.parameter(shape=(10, 20, 5), init=init)
    value = np.asarray(p)
    assert np.allclose(np.average(value), 0, atol=0.1)
    assert np.var(value) > 0.01


def test_initializers_centre_and_spread():
    _check(C.uniform(scale=1))
    _check(C.normal(scale=1))
    _check(C.glorot_uniform(scale=10))
    _check(C.glorot_normal(scale=10))
    _check(C.initializer.glorot_uniform(scale=10, seed=98052))


def test_a_seeded_initializer_draws_the_same_values_each_time():
    first = C.parameter((4, 3), init=C.glorot_uniform(seed=7)).value
    second = C.parameter((4, 3), init=C.glorot_uniform(seed=7)).value
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, C.parameter((4, 3), init=C.glorot_uniform(seed=8)).value)


def test_output_and_filter_ranks_are_a_clear_error():
    # CNTK's case passes output_rank=1, filter_rank=2 (and xavier, he_uniform, he_normal, which loom lacks).
    with pytest.raises(C.UserError, match="output_rank and filter_rank"):
        C.glorot_uniform(scale=10, output_rank=1, filter_rank=2)
