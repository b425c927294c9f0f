"""Reference counting: a graph lives as long as one of its outputs; results own their memory;
10^4 evals leave the process' memory flat."""

import gc

import numpy as np

import loom as C
from support import assert_close


def _make_graph():
    x = C.sequence.input_variable(2, name="x")
    w = C.parameter((2, 1), init=np.array([[1.0], [2.0]]), name="w")
    p = C.placeholder()
    h = C.times(x, w) + C.past_value(p)
    h.replace_placeholders({p: h})
    return C.sequence.reduce_sum(h)  # x, w and p go out of scope here


def test_a_graph_kept_alive_by_its_output_only():
    f = _make_graph()
    gc.collect()
    x = f.arguments[0]
    assert x.name == "x" and [p.name for p in f.parameters] == ["w"]
    seq = np.array([[1.0, 0.0], [0.0, 1.0]])
    # h = cumulative sum of x.w: 1, 3; reduce_sum: 4
    assert_close(f.eval({x: [seq]}), [[4.0]])


def test_results_outlive_the_graph():
    f = _make_graph()
    x = f.arguments[0]
    out = f.eval({x: [np.ones((3, 2))]})
    del f, x
    gc.collect()
    assert_close(out, [[1 * 3 + 2 * 3 + 3 * 3.0]])


def _rss_kb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_no_leak_over_ten_thousand_evals():
    f = _make_graph()
    x = f.arguments[0]
    w = f.parameters[0]
    batch = [np.ones((4, 2), np.float32), np.ones((2, 2), np.float32)]
    for _ in range(500):  # warm up the allocator and numpy
        f.eval({x: batch})
        f.grad({x: batch}, wrt=[w, x])
    before = _rss_kb()
    for _ in range(10_000):
        f.eval({x: batch})
    for _ in range(1_000):
        f.grad({x: batch}, wrt=[w, x])
    grown = _rss_kb() - before
    print(f"RSS grew {grown} kB over 10^4 evals and 10^3 grads")
    assert grown < 8 * 1024
