"""Ctrl-C stops a long eval, grad or forward with KeyboardInterrupt between the engine's steps, and
the graph runs whole afterwards."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import loom as C


def _loop():
    """h_t = tanh(x_t W + h_{t-1} U): a loop of as many steps as the sequence."""
    x = C.sequence.input_variable(2, name="x")
    W = C.parameter((2, 3), init=C.glorot_uniform(), name="W")
    U = C.parameter((3, 3), init=C.glorot_uniform(), name="U")
    p = C.placeholder(name="h")
    h = C.tanh(C.times(x, W) + C.times(C.past_value(p), U))
    h.replace_placeholders({p: h})
    return x, C.sequence.reduce_sum(C.reduce_sum(h))


def _long_enough(f, x, seconds):
    """A sequence whose eval of f takes about `seconds` on this machine."""
    steps = 20000
    begin = time.perf_counter()
    f.eval({x: [np.ones((steps, 2), np.float32)]})
    per_step = (time.perf_counter() - begin) / steps
    return [np.ones((int(seconds / per_step) + 1, 2), np.float32)]


@pytest.mark.parametrize("call", ["eval", "grad", "forward"])
def test_ctrl_c_stops_a_long_call_with_keyboard_interrupt(call):
    x, f = _loop()
    data = _long_enough(f, x, 6.0)
    run = {"eval": lambda: f.eval({x: data}),
           "grad": lambda: f.grad({x: data}, wrt=f.parameters),
           "forward": lambda: f.forward({x: data}, keep_for_backward=[f])}[call]
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    begin = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run()
    finally:
        timer.cancel()
    assert time.perf_counter() - begin < 3.0  # stopped at once, not at the end of about 6 s
    # The graph runs whole afterwards: against the recurrence in numpy.
    values = {p.name: p.value.astype(np.float64) for p in f.parameters}
    W, U = values["W"], values["U"]
    h, total = np.zeros(3), 0.0
    for _ in range(4):
        h = np.tanh(np.ones(2) @ W + h @ U)
        total += h.sum()
    np.testing.assert_allclose(f.eval({x: [np.ones((4, 2), np.float32)]}), [[total]], rtol=1e-5)
