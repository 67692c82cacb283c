"""`python -m benchmarks`: the entry point's plumbing (no timings are asserted: speed lives in the
benchmark output, not in tests)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import benchmarks.__main__ as entry  # noqa: E402
from benchmarks.sections import SECTIONS  # noqa: E402


def test_every_section_is_listed_with_a_title():
    assert set(SECTIONS) == {"compile", "stages", "executor", "sass", "counters", "gpu"}
    assert all(title and callable(fn) for title, fn in SECTIONS.values())


def test_write_doc_keeps_the_hand_written_text(tmp_path, monkeypatch):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nGPU status: hand-written.\n")
    monkeypatch.setattr(entry, "DOC", str(doc))
    entry.write_doc("first run")
    entry.write_doc("second run")                 # replaces the generated part only
    text = doc.read_text()
    assert "GPU status: hand-written." in text
    assert "second run" in text and "first run" not in text
    assert text.count(entry.BEGIN) == 1 and text.count(entry.END) == 1


def test_a_failing_section_is_reported_not_raised():
    text, _ = entry.run_section("no_such_section", quick=True, timeout=120)
    assert text.startswith("**section failed**") and "KeyError" in text


def test_help_runs():
    res = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0 and "--quick" in res.stdout and "--gpu" in res.stdout
