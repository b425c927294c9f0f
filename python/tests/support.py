"""Helpers the tests share: random data, totals, and gradients by central differences in float64."""

import numpy as np


def rng(seed=0):
    return np.random.default_rng(seed)


def total(value, weights=None):
    """The sum of an eval result (an array, or a list of per-sequence arrays)."""
    if isinstance(value, list):
        return float(sum(np.sum(v) for v in value))
    return float(np.sum(value))


def numeric_gradient(loss, array, eps=1e-6):
    """d loss() / d array by central differences, perturbing `array` in place (float64)."""
    grad = np.zeros_like(array)
    flat, gflat = array.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + eps
        up = loss()
        flat[i] = keep - eps
        down = loss()
        flat[i] = keep
        gflat[i] = (up - down) / (2 * eps)
    return grad


def parameter_numeric_gradient(f, data, p, eps=1e-6):
    """d sum(f.eval(data)) / d p by central differences on p's value (a float64 parameter)."""
    value = p.value.copy()

    def loss():
        p.value = value
        return total(f.eval(data))

    g = numeric_gradient(loss, value, eps)
    p.value = value
    return g


def assert_close(actual, expected, rtol=1e-6, atol=1e-8):
    if isinstance(actual, list):  # per-sequence arrays
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)
    else:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def lstm_reference(seq, W, U, b, n, backwards=False):
    """An LSTM of n units over the rows of seq in numpy: gates from x W + h U + b in the order
    input, forget, output, candidate (loom's and CNTK's layout); h of every step."""
    h, c = np.zeros(n), np.zeros(n)
    out = []
    for x in (seq[::-1] if backwards else seq):
        z = x @ W + b + h @ U
        sigmoid = 1 / (1 + np.exp(-z[:3 * n]))
        i, f, o, g = sigmoid[:n], sigmoid[n:2 * n], sigmoid[2 * n:], np.tanh(z[3 * n:])
        c = f * c + i * g
        h = o * np.tanh(c)
        out.append(h)
    out = np.array(out)
    return out[::-1] if backwards else out
