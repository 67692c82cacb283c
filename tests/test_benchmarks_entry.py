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
    assert "--write" in res.stdout


def _docs_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--", "docs"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout


def _fake_sections(monkeypatch):
    """Every section answered at once (the real ones take minutes)."""
    calls = []

    def fake(name, quick, timeout, progress=None):
        calls.append(name)
        if progress is not None:
            progress("halfway")
        return f"table of {name}", 0.0
    monkeypatch.setattr(entry, "run_section", fake)
    return calls


def test_quick_prints_and_writes_no_tracked_file(monkeypatch, capsys):
    # before: `--quick` rewrote docs/benchmarks.md (and, without numba-cuda, every peer figure
    # became "—"); now the report goes to stdout and the checkout is left alone
    before = _docs_status()
    calls = _fake_sections(monkeypatch)
    assert entry.main(["--quick"]) == 0
    out, err = capsys.readouterr()
    assert calls == [n for n in SECTIONS if n != "gpu"]
    for name in calls:
        title = SECTIONS[name][0]
        assert f"### {title}" in out and f"table of {name}" in out       # the report: stdout
        assert f"{name}: {title} ..." in err and f"{name}: halfway" in err  # progress: stderr
    assert "Machine:" in out and "Whole run" in out and "not changed" in err
    assert _docs_status() == before


def test_write_updates_the_doc(monkeypatch, tmp_path, capsys):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nhand-written.\n")
    monkeypatch.setattr(entry, "DOC", str(doc))
    _fake_sections(monkeypatch)
    assert entry.main(["--quick", "--only", "executor", "--write"]) == 0
    text = doc.read_text()
    assert "hand-written." in text and "table of executor" in text and entry.BEGIN in text
    assert "wrote" in capsys.readouterr().err


def test_a_real_section_streams_progress_and_leaves_docs_alone(tmp_path):
    """The real command on its fastest section (the executor, ~1 s): report on stdout,
    section names and progress on stderr, docs/ untouched; without numba-cuda the note comes
    once and no column is filled with "—"."""
    before = _docs_status()
    res = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--only", "executor"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr
    assert "| kernel | executor ms |" in res.stdout and "saxpy" in res.stdout
    assert "[1/1] executor: CPU executor ..." in res.stderr
    assert "executor: kernel 1/3: saxpy" in res.stderr
    assert "progress:" not in res.stdout + res.stderr
    try:
        from numba import cuda  # noqa: F401
    except Exception:  # noqa: BLE001 - no peer: said once, columns left out
        assert res.stdout.count("numba-cuda not available") == 1
        assert "—" not in res.stdout and "simulator ms" not in res.stdout
    assert _docs_status() == before


def test_unknown_section_is_a_usage_error():
    res = subprocess.run([sys.executable, "-m", "benchmarks", "--only", "nope"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 2 and "invalid choice" in res.stderr
