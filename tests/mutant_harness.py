"""Plant one bug in a temporary copy of the repository and run the tests that must catch it.

Why: a rewrite can quietly lose the coverage a bug needs (a barrier's removal passed everything
once: the lockstep executor hides the race and the sanitizer tests used too few tiles).  Each
`Mutant` names an exact piece of source text, what to put instead, and the pytest node ids that
must fail with the mutant planted; `tests/test_mutants*.py` assert that they do.

The copy holds the tracked and untracked-but-not-ignored files (what `git ls-files` lists, or the
whole tree without `.git` where git is absent), so the planted file is the only difference; the
run uses the same interpreter, no disk cache (`PYPTX_NO_CACHE=1`: a cached PTX of the unmutated
kernel must not answer) and the CPU executor.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Mutant:
    name: str            # what the bug is, in words (the test id)
    path: str            # file relative to the repository root
    old: str             # exact text, found exactly once in the file
    new: str             # what replaces it
    tests: tuple         # pytest node ids (relative to the root) that must fail


def _files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                             capture_output=True, check=True).stdout
        return [f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(ROOT, f))]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, files in os.walk(ROOT):
            dirs[:] = [x for x in dirs if x not in (".git", "__pycache__", ".hypothesis")]
            found += [os.path.relpath(os.path.join(d, f), ROOT) for f in files]
        return found


def copy_tree(dest: str) -> None:
    for rel in _files():
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, rel), target)


def plant(root: str, m: Mutant) -> None:
    path = os.path.join(root, m.path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    n = text.count(m.old)
    if n != 1:
        raise AssertionError(f"mutant '{m.name}': the text to replace occurs {n} times in "
                             f"{m.path} (must be once; the source changed: update the mutant)")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(m.old, m.new))


def run_tests(root: str, tests, timeout: float = 900) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYPTX_NO_CACHE="1", PYPTX_DEVICE="cpu", PYTHONPATH=path,
               PYTHONDONTWRITEBYTECODE="1")    # the copy first; keep what the caller added
    return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                           "-m", "slow or not slow", *tests], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)


def assert_caught(m: Mutant) -> None:
    """The mutant's tests pass on the clean copy and fail with the mutant planted."""
    with tempfile.TemporaryDirectory(prefix="pyptx-mutant-") as tmp:
        copy_tree(tmp)
        clean = run_tests(tmp, m.tests)
        assert clean.returncode == 0, (f"mutant '{m.name}': its tests fail without the mutant:\n"
                                       f"{clean.stdout[-3000:]}{clean.stderr[-2000:]}")
        plant(tmp, m)
        bad = run_tests(tmp, m.tests)
        assert bad.returncode == 1, (f"mutant '{m.name}' was not caught by {m.tests} (pytest "
                                     f"exit {bad.returncode}):\n{bad.stdout[-3000:]}"
                                     f"{bad.stderr[-2000:]}")
