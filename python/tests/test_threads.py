"""The GIL is released while the engine runs: two Python threads evaluate two graphs at once."""

import threading
import time

import numpy as np

import loom as C


def _graph(seed):
    C.set_seed(seed)
    x = C.sequence.input_variable(64, name="x")
    w = C.parameter((64, 64), init=C.glorot_uniform(), name="w")
    p = C.placeholder()
    h = C.tanh(C.times(x, w) + C.past_value(p))
    h.replace_placeholders({p: h})
    return C.sequence.reduce_sum(h), x


def test_two_threads_run_two_graphs_at_once():
    graphs = [_graph(1), _graph(2)]
    batch = [np.random.default_rng(0).normal(size=(50, 64)).astype(np.float32) for _ in range(32)]
    expected = [f.eval({x: batch}) for f, x in graphs]
    results = [None, None]

    def run(i):
        f, x = graphs[i]
        for _ in range(3):
            results[i] = f.eval({x: batch})

    start = time.perf_counter()
    run(0)
    run(1)
    serial = time.perf_counter() - start
    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    parallel = time.perf_counter() - start
    print(f"two graphs one after the other {serial:.3f} s, in two threads {parallel:.3f} s "
          f"(ratio {parallel / serial:.2f}; not asserted: the machine is shared)")
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, want)
