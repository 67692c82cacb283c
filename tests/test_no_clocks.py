"""The test suite never reads a clock: speed is measured (and compared with peers) in
benchmarks/, where a busy machine changes a number instead of failing a build.

Checked on the text of every file under tests/ (so code passed to subprocesses as strings counts
too): no import of the `time`, `timeit` or `datetime` modules and no call of a clock function.
"""
from __future__ import annotations

import pathlib
import re

TESTS = pathlib.Path(__file__).resolve().parent

#: what reading a clock looks like in Python source
CLOCK_PATTERNS = [
    r"^\s*import\s+[^#\n]*\b(time|timeit|datetime)\b",
    r"^\s*from\s+(time|timeit|datetime)\s+import\b",
    r"\b(perf_counter|perf_counter_ns|monotonic|monotonic_ns|process_time|thread_time|"
    r"time_ns|timeit|datetime|clock_gettime)\b",
    r"(?<![\w.])time\.\w+",
    r"__import__\(\s*['\"](time|timeit|datetime)['\"]",
    r"\bpytest_benchmark\b|\bbenchmark\s*\(",
]
_CLOCK = re.compile("|".join(f"(?:{p})" for p in CLOCK_PATTERNS), re.M)


def clock_reads(text: str) -> list[str]:
    return [m.group(0).strip() for m in _CLOCK.finditer(text)]


def test_no_test_reads_a_clock():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.resolve() == pathlib.Path(__file__).resolve():
            continue
        for hit in clock_reads(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(TESTS)}: {hit}")
    assert not offenders, ("tests must not read clocks; move speed checks to benchmarks/:\n"
                           + "\n".join(offenders))


def test_the_check_recognises_clock_reads():
    bad = ["import time\n", "import os, time\n", "from time import perf_counter\n",
           "t0 = time.perf_counter()\n", "x = time.monotonic()\n", "import timeit\n",
           "from datetime import datetime\n", "t = __import__('time').time()\n",
           "code = 'import sys, time; print(time.time())'\n"]
    for line in bad:
        assert clock_reads(line), line
    good = ["from pyptx.runtime.cpu import launch\n", "import pyptx.runtime.profile\n",
            "x = runtime.cpu\n", "deadline=None\n", "# compile-time constant\n",
            "lifetime.x = 1\n"]
    for line in good:
        assert not clock_reads(line), line
