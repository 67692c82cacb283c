"""Output the docs quote is the output the code prints: every fenced block preceded by
`<!-- output of examples/NAME.py -->` must appear, line for line, in what that example prints
on the CPU executor.  When the compiler changes an instruction count or an example moves a
line, this fails until the doc is updated (regenerate the block from the example's output)."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARK = re.compile(r"^<!-- output of (examples/[\w/]+\.py) -->\n```\n(.*?)^```", re.S | re.M)


def quoted():
    out = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        text = doc.read_text()
        for m in MARK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append(pytest.param(m.group(1), m.group(2), id=f"{doc.name}:{line}"))
    return out


QUOTED = quoted()
_RUNS: dict = {}


def _output(example: str) -> str:
    if example not in _RUNS:
        env = {**os.environ, "PYPTX_DEVICE": "cpu", "PYTHONPATH": str(ROOT)}
        env.pop("PYPTX_SANITIZE", None)
        res = subprocess.run([sys.executable, str(ROOT / example)], capture_output=True,
                             text=True, env=env, timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
        _RUNS[example] = res.stdout
    return _RUNS[example]


def test_the_docs_quote_example_output():
    assert any(p.id.startswith("checking.md") for p in QUOTED)


@pytest.mark.parametrize("example, block", QUOTED)
def test_quoted_output_matches_the_example(example, block):
    printed = [line.rstrip() for line in _output(example).splitlines()]
    missing = [line for line in block.rstrip("\n").splitlines() if line.rstrip() not in printed]
    assert not missing, (f"{example} no longer prints these quoted lines (update the doc "
                         f"from its output): {missing}")
