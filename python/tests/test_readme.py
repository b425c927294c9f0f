"""The README's ```python blocks run as they are written, and say what they claim."""

import os
import re

import numpy as np

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_the_readme_python_block_runs_and_its_weights_are_a_softmax_per_sequence(capsys):
    with open(README, encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert blocks, "the README shows loom from Python"
    for block in blocks:
        scope = {}
        exec(compile(block, "README.md", "exec"), scope)
    # The attention block: each sequence's weights are exp(z) / sum exp(z) of z = x w_q.
    w = scope["w_q"].value[:, 0]
    for weights, x in zip(scope["weights"], scope["batch"]):
        z = x.astype(np.float64) @ w
        np.testing.assert_allclose(weights[:, 0], np.exp(z) / np.exp(z).sum(), rtol=1e-5)
    assert capsys.readouterr().out.strip()
