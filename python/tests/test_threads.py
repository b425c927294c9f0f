"""The GIL is released while the engine runs: two Python threads evaluate two graphs at once."""

import threading
import time

import numpy as np

import loom as C


def _graph(seed):
    C.set_seed(seed)
    x = C.sequence.input_variable(128, name="x")
    w = C.parameter((128, 128), init=C.glorot_uniform(), name="w")
    p = C.placeholder()
    h = C.tanh(C.times(x, w) + C.past_value(p))
    h.replace_placeholders({p: h})
    return C.sequence.reduce_sum(h), x


def test_two_threads_run_two_graphs_at_once():
    graphs = [_graph(1), _graph(2)]
    batch = [np.random.default_rng(0).normal(size=(200, 128)).astype(np.float32) for _ in range(64)]
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


def test_python_runs_while_the_engine_evaluates():
    """While one thread is inside eval, another thread's Python keeps running: the GIL is released.

    Held, the main thread below would wait the whole eval between two of its iterations."""
    f, x = _graph(3)
    batch = [np.random.default_rng(1).normal(size=(400, 128)).astype(np.float32) for _ in range(64)]
    took = []
    done = threading.Event()

    def run():
        start = time.perf_counter()
        f.eval({x: batch})
        took.append(time.perf_counter() - start)
        done.set()

    worker = threading.Thread(target=run)
    last = time.perf_counter()
    longest = 0.0
    worker.start()
    while not done.is_set():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
    worker.join()
    print(f"eval took {took[0]:.3f} s; the main thread's longest wait meanwhile {longest:.4f} s")
    assert longest < 0.5 * took[0]
