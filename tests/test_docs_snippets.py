"""The runnable snippets of the docs execute: every fenced ```python block whose first line is
`# run` (docs/language.md, docs/getting-started.md) runs on the CPU executor and checks its own
result, so the reference cannot drift from the compiler."""
from __future__ import annotations

import pathlib
import re
import runpy

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "docs" / "language.md", ROOT / "docs" / "getting-started.md",
        ROOT / "docs" / "hopper.md"]
FENCE = re.compile(r"^```python\n(# run\n.*?)^```", re.S | re.M)


def snippets():
    out = []
    for doc in DOCS:
        if not doc.exists():
            continue
        text = doc.read_text()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 2          # the `# run` line
            out.append(pytest.param(m.group(1), id=f"{doc.name}:{line}"))
    return out


SNIPPETS = snippets()


def test_the_reference_has_runnable_snippets():
    assert sum(1 for p in SNIPPETS if p.id.startswith("language.md")) >= 20


@pytest.mark.parametrize("code", SNIPPETS)
def test_snippet_runs(code, tmp_path, monkeypatch):
    # the frontend reads kernel source with inspect, so each snippet runs from a real file
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    monkeypatch.delenv("PYPTX_SANITIZE", raising=False)
    path = tmp_path / "snippet.py"
    path.write_text(code)
    runpy.run_path(str(path), run_name="__main__")
