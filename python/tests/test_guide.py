"""Every ```python block of docs/guide.md runs as it is written, each in a fresh namespace; a failing
block is reported under its section's name. Each block asserts what the guide says it shows; the
blocks that train take a few hundred steps of tiny models, about a second for the whole guide."""

import contextlib
import io
import os
import re

import pytest

GUIDE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "guide.md")


def _sections():
    """(section title, [python blocks]) for each '## ' section of the guide, in order."""
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    parts = re.split(r"(?m)^## (.*)$", text)[1:]
    return [(title.strip(), re.findall(r"(?m)^```python\n(.*?)^```", body, re.S))
            for title, body in zip(parts[0::2], parts[1::2])]


def _blocks():
    return [(title, n, block) for title, blocks in _sections() for n, block in enumerate(blocks, 1)]


def test_every_section_of_the_guide_has_a_python_program():
    sections = _sections()
    assert len(sections) >= 14
    assert [title for title, blocks in sections if not blocks] == []
    # Each is CNTK's Python with loom's import line, a whole program.
    assert [(t, n) for t, n, block in _blocks() if "import loom as C\n" not in block] == []


@pytest.mark.parametrize("title,n,block", _blocks(), ids=[f"{t} #{n}" for t, n, _ in _blocks()])
def test_the_python_block_runs(title, n, block):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = compile(block, f"docs/guide.md, section '{title}', python block {n}", "exec")
            exec(code, {"__name__": "__main__"})
    except Exception as e:
        raise AssertionError(f"docs/guide.md, section '{title}': python block {n} failed: {e!r}\n"
                             f"its output:\n{out.getvalue()}") from e
