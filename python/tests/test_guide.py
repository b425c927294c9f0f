"""The ```python blocks of docs/guide.md's section "loom from Python" run as they are written."""

import os
import re

GUIDE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "guide.md")


def _blocks():
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## loom from Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_guide_has_python_blocks_of_loom():
    assert len(_blocks()) >= 1


def test_each_python_block_of_the_guide_runs():
    for block in _blocks():
        exec(compile(block, "docs/guide.md", "exec"), {})
