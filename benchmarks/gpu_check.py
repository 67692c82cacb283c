"""`python -m benchmarks.gpu_check [--out DIR] [--minutes 8] [--dry-run]`: the one-command
GPU check.

On a machine with a GPU, within the given minutes: `python -m pyptx info`, the whole test-suite
with PYPTX_DEVICE=gpu (parallel where pytest-xdist is installed), every example with
PYPTX_DEVICE=gpu, GPU timings of the stdlib against the best peer present
(benchmarks/gpu_timings.py), and the llama model's tokens/s.  Writes DIR/gpu_check.md and
DIR/gpu_check.json after every step (partial results survive a kill), the steps' full output
under DIR/logs/ (or `--logs`) and packed into DIR/gpu_check_logs.tar.gz, and exits 1 when any
step failed or timed out, 0 when all passed.

Every step runs in its own process group with a time budget; a step that outruns it is killed
(its whole group) and reported as timed out, and the check goes on with the next step.  The
budgets are shares of `--minutes` and add up to less than it; time a step leaves unused is
added to the next step's budget.  Without a GPU: one line saying why, exit 2.  `--dry-run`
prints the plan (every step, its budget and command) and exits 0, GPU or not.
"""
from __future__ import annotations

import argparse
import datetime
import glob
import importlib.util
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import gpu_timings  # noqa: E402

#: (step, share of the minutes); the shares add up to 1, and USABLE of the minutes is budgeted
#: (the rest is the orchestrator's own start and report writing)
WEIGHTS = (("info", 0.03), ("suite", 0.55), ("examples", 0.15), ("timings", 0.17),
           ("decode", 0.10))
USABLE = 0.97
SUITE_WORKERS_MAX = 16
SUITE_TEST_TIMEOUT = 120         # pytest-timeout's per-test limit, where it is installed
#: modules the steps use: pyptx's runtime and test dependencies (pyproject.toml), the peers
MODULES = ("numpy", "lark", "cuda.bindings", "pytest", "hypothesis", "gguf", "mpmath",
           "ml_dtypes", "xdist", "pytest_timeout", "torch", "cupy", "numba")


# ---- running one command -------------------------------------------------------------------------

@dataclass
class Command:
    label: str
    argv: list
    env: dict = field(default_factory=dict)      # added to the environment
    cap: float | None = None                     # at most this many seconds (within the step's)


@dataclass
class Result:
    label: str
    rc: int | None                               # None: killed (timed out) or not run
    timed_out: bool
    seconds: float
    stdout: str
    stderr: str
    log: str = ""                                # path of the stdout log, relative to DIR


def _module_present(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def child_env(extra: dict) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    env.update(extra)
    return env


def _own_group() -> dict:
    """Popen arguments that start the child in a process group of its own (same session, so
    whoever ends this session's processes ends it too)."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_command(cmd: Command, timeout: float, logdir: str) -> Result:
    """Run `cmd` with its output in logdir/<label>.out/.err; past `timeout` seconds its whole
    process group is killed (Result.timed_out).  Result.log names the stdout log as it appears
    in the logs' tarball."""
    os.makedirs(logdir, exist_ok=True)
    base = os.path.join(logdir, re.sub(r"[^\w.-]", "_", cmd.label))
    t0 = time.monotonic()
    timed_out, rc = False, None
    with open(base + ".out", "w") as out, open(base + ".err", "w") as err:
        try:
            proc = subprocess.Popen(cmd.argv, cwd=ROOT, env=child_env(cmd.env), stdout=out,
                                    stderr=err, stdin=subprocess.DEVNULL, **_own_group())
        except OSError as e:
            err.write(f"could not start {cmd.argv[0]}: {e}\n")
            proc = None
        if proc is not None:
            try:
                rc = proc.wait(timeout=max(timeout, 0.1))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
            except BaseException:
                _kill_group(proc)               # interrupted: leave nothing running
                proc.wait()
                raise
            if timed_out:
                proc.wait()
    seconds = time.monotonic() - t0

    def read(path):
        with open(path, errors="replace") as f:
            return f.read()
    return Result(cmd.label, rc if rc is not None or timed_out else 127, timed_out, seconds,
                  read(base + ".out"), read(base + ".err"),
                  "logs/" + os.path.basename(base) + ".out")


# ---- steps ---------------------------------------------------------------------------------------

@dataclass
class Step:
    name: str
    budget: float                                 # seconds
    what: str                                     # one line for the plan
    commands: Callable[[], list]                  # -> [Command]
    parse: Callable[[list], dict]                 # [Result] -> {status, summary, details, md}


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _fail_block(results) -> str:
    """The end of the output of every command that did not pass."""
    parts = []
    for r in results:
        if r.rc != 0:
            parts.append(f"`{r.label}` ({'timed out' if r.timed_out else f'exit {r.rc}'}, "
                         f"log `{r.log}`):\n\n```text\n{_tail(r.stdout + r.stderr)}\n```")
    return "\n\n".join(parts)


def _status(results) -> str:
    if any(r.timed_out for r in results):
        return "timed out"
    return "passed" if results and all(r.rc == 0 for r in results) else "failed"


def parse_info(results) -> dict:
    r = results[0]
    ok = r.rc == 0 and "GPU:" in r.stdout and "no GPU" not in r.stdout
    status = _status(results) if r.rc != 0 else ("passed" if ok else "failed")
    first = (r.stdout.strip().splitlines() or ["(no output)"])[0]
    return {"status": status, "summary": first, "details": {"output": r.stdout.strip()},
            "md": f"```text\n{(r.stdout + r.stderr).strip()}\n```"}


# -- the test-suite

_SUMMARY_WORDS = {"passed": "passed", "failed": "failed", "skipped": "skipped", "error": "error",
                  "errors": "error", "xfailed": "xfailed", "xpassed": "xpassed",
                  "deselected": "deselected", "warning": "warnings", "warnings": "warnings",
                  "rerun": "rerun"}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PROGRESS = re.compile(r"^([.FEsxXR]+)\s*(\[\s*\d+%\])?\s*$")
_PROGRESS_KEYS = {".": "passed", "F": "failed", "E": "error", "s": "skipped", "x": "xfailed",
                  "X": "xpassed", "R": "rerun"}


def parse_pytest_summary(text: str) -> dict | None:
    """Counts of pytest's closing line ('3 failed, 2940 passed, 6 skipped in 300.1s'; '1 error
    in 0.5s'; '== ... ==' framed or not), plus 'seconds'; None when there is none."""
    for line in reversed(_ANSI.sub("", text).splitlines()):
        s = line.strip().strip("=").strip()
        m = re.search(r"\bin (\d+(?:\.\d+)?)s\b", s)
        if not m:
            continue
        head = s[:m.start()].strip()
        pairs = re.findall(r"(\d+) (\w+)", head)
        leftover = re.sub(r"(\d+) (\w+)", "", head).replace(",", "").strip()
        if head == "no tests ran" or (pairs and not leftover
                                      and all(w in _SUMMARY_WORDS for _, w in pairs)):
            counts = {}
            for n, w in pairs:
                key = _SUMMARY_WORDS[w]
                counts[key] = counts.get(key, 0) + int(n)
            counts["seconds"] = float(m.group(1))
            return counts
    return None


def parse_pytest_failures(text: str) -> list:
    """Test ids of the 'FAILED id - msg' / 'ERROR id - msg' lines (pytest -rfE), in order."""
    ids = []
    for line in _ANSI.sub("", text).splitlines():
        m = re.match(r"^(FAILED|ERROR) (\S+)", line)
        if m and m.group(2) not in ids:
            ids.append(m.group(2))
    return ids


def parse_pytest_progress(text: str) -> dict:
    """Outcome counts from the progress lines of `pytest -q` ('..F.s  [ 12%]'): what a run that
    was killed before its summary had reported."""
    counts: dict = {}
    for line in _ANSI.sub("", text).splitlines():
        m = _PROGRESS.match(line.strip())
        if m:
            for ch in m.group(1):
                key = _PROGRESS_KEYS[ch]
                counts[key] = counts.get(key, 0) + 1
    return counts


def _counts_text(counts: dict) -> str:
    order = ("failed", "error", "passed", "skipped", "xfailed", "xpassed", "deselected",
             "rerun", "warnings")
    return ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k)) or "no tests"


def suite_argv() -> list:
    argv = [sys.executable, "-m", "pytest", "-rfE", "--tb=short"]
    if _module_present("xdist"):
        argv += ["-n", str(min(os.cpu_count() or 1, SUITE_WORKERS_MAX))]
    if _module_present("pytest_timeout"):
        argv += [f"--timeout={SUITE_TEST_TIMEOUT}"]
    return argv


def parse_suite(results) -> dict:
    r = results[0]
    text = r.stdout + "\n" + r.stderr
    counts = parse_pytest_summary(r.stdout) or parse_pytest_summary(text)
    failures = parse_pytest_failures(r.stdout)
    crashes = [ln.strip() for ln in text.splitlines()
               if "node down" in ln or "crashed worker" in ln][:20]
    details = {"counts": counts, "failing": failures[:500], "exit": r.rc, "crashes": crashes}
    if r.timed_out or counts is None:
        progress = parse_pytest_progress(r.stdout)
        details["progress"] = progress
        why = f"timed out after {r.seconds:.0f} s" if r.timed_out else \
            f"no pytest summary line (exit {r.rc})"
        summary = f"{why}; reported before that: {_counts_text(progress)}"
        status = "timed out" if r.timed_out else "failed"
    else:
        summary = f"{_counts_text(counts)} in {counts['seconds']:.0f} s"
        status = "passed" if r.rc == 0 and not counts.get("failed") and \
            not counts.get("error") else "failed"
    md = [f"`{' '.join(os.path.basename(a) if i == 0 else a for i, a in enumerate(suite_argv()))}"
          f"` with PYPTX_DEVICE=gpu: **{summary}** "
          f"({'killed' if r.timed_out else f'exit {r.rc}'}, log `{r.log}`)."]
    if failures:
        md += ["", f"Failing ({len(failures)}):", ""] + [f"* `{t}`" for t in failures[:100]]
        if len(failures) > 100:
            md.append(f"* … {len(failures) - 100} more in the log")
    if crashes:
        md += ["", "Worker crashes:", ""] + [f"* {c}" for c in crashes]
    if status != "passed":
        md += ["", "End of the output:", "", f"```text\n{_tail(r.stdout + r.stderr, 40)}\n```"]
    return {"status": status, "summary": summary, "details": details, "md": "\n".join(md)}


# -- examples

def example_paths() -> list:
    return sorted(glob.glob(os.path.join(ROOT, "examples", "*.py")))


def example_cap(budget: float) -> float:
    """Seconds one example may take: half the step's budget (30 s at least), so one hanging
    example leaves time for the others."""
    return max(30.0, budget / 2)


def example_commands(budget: float) -> list:
    cap = example_cap(budget)
    return [Command(f"example-{os.path.basename(p)}", [sys.executable, p],
                    {"PYPTX_DEVICE": "gpu"}, cap) for p in example_paths()]


def _missing_module(text: str) -> str | None:
    m = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", text)
    return m.group(1) if m else None


def parse_examples(results) -> dict:
    rows, details = [], {}
    for r in results:
        name = r.label.replace("example-", "", 1)
        missing = _missing_module(r.stderr)
        if r.rc == 0:
            status = "passed"
            note = _tail(r.stdout, 1)
        elif r.timed_out:
            status = "timed out" if r.seconds > 0 else "not run"
            note = r.stderr.strip() if r.seconds == 0 else f"killed after {r.seconds:.0f} s"
        else:
            status = "failed"
            note = (f"missing module {missing!r} (carry its wheel: docs/benchmarks.md)"
                    if missing else _tail(r.stderr or r.stdout, 1))
        details[name] = {"status": status, "seconds": round(r.seconds, 1), "note": note,
                         "exit": r.rc}
        rows.append(f"| {name} | {status if status == 'passed' else f'**{status}**'} | "
                    f"{r.seconds:.1f} | {note.replace('|', '/')} |")
    bad = [n for n, d in details.items() if d["status"] != "passed"]
    summary = (f"{len(results) - len(bad)} of {len(results)} passed"
               + (f"; not passing: {', '.join(bad)}" if bad else ""))
    md = "\n".join(["| example | status | s | last line / reason |", "| --- | --- | --- | --- |"]
                   + rows)
    fails = _fail_block([r for r in results if r.seconds > 0])
    return {"status": _status(results), "summary": summary, "details": details,
            "md": md + ("\n\n" + fails if fails else "")}


# -- timings and decode

def parse_rows_step(results) -> dict:
    r = results[0]
    rows = gpu_timings.parse_rows(r.stdout)
    bad = [row["name"] for row in rows if not row.get("ok")]
    if r.timed_out:
        status, why = "timed out", f"timed out after {r.seconds:.0f} s"
    elif r.rc == 0 and rows and not bad:
        status, why = "passed", ""
    else:
        status, why = "failed", f"exit {r.rc}"
    summary = "; ".join(filter(None, [why, f"{len(rows)} rows", (f"not ok: {', '.join(bad)}"
                                                                  if bad else "")]))
    if rows and rows[0].get("unit") == "tokens/s" and not rows[0].get("error"):
        summary = f"{rows[0]['ours']:.0f} tokens/s (graph replay); " + summary
    md = gpu_timings.format_rows(rows) if rows else "No rows were measured."
    if status != "passed":
        md += "\n\n" + _fail_block(results)
    return {"status": status, "summary": summary, "details": {"rows": rows}, "md": md}


# ---- the plan ------------------------------------------------------------------------------------

def budgets(minutes: float, only=None) -> dict:
    """{step: seconds}: shares of USABLE * minutes (of the selected steps), at least 1 s each."""
    chosen = [(n, w) for n, w in WEIGHTS if not only or n in only]
    total = sum(w for _, w in chosen)
    return {n: max(1, int(minutes * 60 * USABLE * w / total)) for n, w in chosen}


def plan(minutes: float, only=None) -> list:
    """The steps, in order, with their budgets (`only`: just these steps)."""
    b = budgets(minutes, only)
    gpu = {"PYPTX_DEVICE": "gpu"}
    timings = [sys.executable, "-m", "benchmarks.gpu_timings"]
    cap = example_cap(b.get("examples", 0))
    table = {
        "info": ("python -m pyptx info",
                 lambda: [Command("info", [sys.executable, "-m", "pyptx", "info"], gpu)],
                 parse_info),
        "suite": ("PYPTX_DEVICE=gpu " + " ".join(["python"] + suite_argv()[1:])
                  + ("" if _module_present("xdist") else "   (no pytest-xdist: serial)"),
                  lambda: [Command("suite", suite_argv(), gpu)], parse_suite),
        "examples": (f"PYPTX_DEVICE=gpu python examples/X.py, each at most {cap:.0f} s: "
                     + ", ".join(os.path.basename(p) for p in example_paths()),
                     lambda: example_commands(b["examples"]), parse_examples),
        "timings": ("python -m benchmarks.gpu_timings kernels --json",
                    lambda: [Command("timings", timings + ["kernels", "--json"], gpu)],
                    parse_rows_step),
        "decode": ("python -m benchmarks.gpu_timings decode --json",
                   lambda: [Command("decode", timings + ["decode", "--json"], gpu)],
                   parse_rows_step),
    }
    return [Step(name, seconds, *table[name]) for name, seconds in b.items()]


def print_plan(steps, minutes: float, out_dir: str) -> None:
    total = sum(s.budget for s in steps)
    print(f"gpu_check plan: {minutes:g} min ({minutes * 60:.0f} s), budgets add up to "
          f"{total:.0f} s; reports in {out_dir}/gpu_check.md and gpu_check.json")
    for s in steps:
        print(f"  {s.name:9s} {s.budget:4.0f} s  {s.what}")
    missing = [m for m in MODULES if not _module_present(m)]
    print(f"python modules missing here: {', '.join(missing) or 'none'}")


# ---- the report ----------------------------------------------------------------------------------

def _dist_version(*names) -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    for n in names:
        try:
            return version(n)
        except PackageNotFoundError:
            continue
    return None


def _quiet(fn, default="unknown"):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a header field must never stop the check
        return f"{default} ({type(e).__name__}: {e})"


def _git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10)
        if head.returncode == 0:
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                   cwd=ROOT, capture_output=True, text=True, timeout=10)
            return head.stdout.strip() + (" (uncommitted changes)" if dirty.stdout.strip()
                                          else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("PYPTX_COMMIT") or "unknown (no git checkout; set PYPTX_COMMIT)"


def _nvidia_driver() -> str:
    res = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=20)
    return res.stdout.strip().splitlines()[0] if res.returncode == 0 else "unknown"


def collect_header() -> dict:
    """Device, driver, versions, date, commit (each field best effort)."""
    from pyptx.runtime import driver
    from pyptx.runtime.profile import gpu_profile

    def device():
        p = gpu_profile()
        return (f"{p.name}, compute capability {p.cc[0]}.{p.cc[1]} ({p.arch}), {p.sm_count} SMs, "
                f"shared memory per block {p.max_shared_per_block_optin} bytes (opt-in)")

    def host():
        from benchmarks.__main__ import machine
        return machine()
    return {
        "device": _quiet(device),
        "driver": f"NVIDIA {_quiet(_nvidia_driver)}, CUDA "
                  f"{_quiet(lambda: gpu_profile().driver_version_str)}",
        "cuda-bindings": _quiet(lambda: driver.bindings_version(driver.get_driver())),
        "torch": _dist_version("torch") or "not installed",
        "cupy": _dist_version("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x")
        or "not installed",
        "numba-cuda": _dist_version("numba-cuda") or "not installed",
        "python": f"{platform.python_version()} ({sys.executable})",
        "numpy": _dist_version("numpy") or "not installed",
        "pytest": f"{_dist_version('pytest')}, pytest-xdist "
                  f"{_dist_version('pytest-xdist') or 'not installed'}, pytest-timeout "
                  f"{_dist_version('pytest-timeout') or 'not installed'}",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _git_commit(),
        "host": _quiet(host),
        "modules missing": ", ".join(m for m in MODULES if not _module_present(m)) or "none",
    }


def render_md(report: dict) -> str:
    steps = report["steps"]
    state = report["status"]
    bad = [s["name"] for s in steps if s["status"] not in ("passed", "pending")]
    if state == "running":
        cur = next((s["name"] for s in steps if s["status"] == "pending"), "?")
        verdict = f"RUNNING (at step {cur}; this file is rewritten after every step)"
    elif state == "interrupted":
        verdict = "INTERRUPTED (the check was stopped; steps still pending did not run)"
    else:
        verdict = "PASSED" if not bad else f"FAILED ({', '.join(bad)})"
    h = report["header"]
    out = [f"# GPU check: {h.get('device', '?').split(',')[0]}", "",
           f"`{report['command']}`: **{verdict}**", "", "| | |", "| --- | --- |"]
    out += [f"| {k} | {str(v).replace('|', '/')} |" for k, v in h.items()]
    out += ["", "## Steps", "", "| step | budget s | took s | status | summary |",
            "| --- | --- | --- | --- | --- |"]
    for s in steps:
        took = "" if s.get("seconds") is None else f"{s['seconds']:.0f}"
        st = s["status"] if s["status"] in ("passed", "pending") else f"**{s['status']}**"
        out.append(f"| {s['name']} | {s['budget']:.0f} | {took} | {st} | "
                   f"{str(s.get('summary', '')).replace('|', '/')} |")
    for s in steps:
        if s.get("md"):
            out += ["", f"## {s['name']}", "", s["md"]]
    return "\n".join(out) + "\n"


def write_report(report: dict, out_dir: str) -> None:
    """gpu_check.json and gpu_check.md, each replaced atomically."""
    os.makedirs(out_dir, exist_ok=True)
    for name, text in (("gpu_check.json", json.dumps(report, indent=1, default=str)),
                       ("gpu_check.md", render_md(report))):
        tmp = os.path.join(out_dir, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out_dir, name))


def pack_logs(logdir: str, out_dir: str) -> None:
    """DIR/gpu_check_logs.tar.gz: every log so far, in one file (replaced atomically)."""
    if not os.path.isdir(logdir):
        return
    tmp = os.path.join(out_dir, "gpu_check_logs.tar.gz.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(logdir, arcname="logs")
    os.replace(tmp, os.path.join(out_dir, "gpu_check_logs.tar.gz"))


def run_check(steps, out_dir: str, header: dict, command: str = "gpu_check",
              runner=run_command, logdir: str | None = None) -> int:
    """Run the steps in order, each within its budget (plus what earlier steps left unused);
    rewrite the reports (and the logs' tarball) after each.  0 when every step passed, else 1."""
    report = {"command": command, "header": header, "status": "running",
              "budget_s": sum(s.budget for s in steps),
              "steps": [{"name": s.name, "budget": s.budget, "status": "pending",
                         "seconds": None, "summary": ""} for s in steps]}
    write_report(report, out_dir)
    logdir = logdir or os.path.join(out_dir, "logs")
    slack = 0.0
    try:
        for step, entry in zip(steps, report["steps"]):
            limit = step.budget + slack
            t0 = time.monotonic()
            results = []
            try:
                for cmd in step.commands():
                    left = limit - (time.monotonic() - t0)
                    if left <= 0:
                        results.append(Result(cmd.label, None, True, 0.0, "",
                                              "not run: the step's budget was spent"))
                        continue
                    results.append(runner(cmd, min(left, cmd.cap) if cmd.cap else left, logdir))
                res = step.parse(results)
            except Exception as e:  # noqa: BLE001 - an orchestrator bug is reported, not raised
                res = {"status": "failed", "summary": f"gpu_check error: {type(e).__name__}: "
                                                      f"{e}", "details": {}, "md": ""}
            took = time.monotonic() - t0
            slack = max(0.0, limit - took)
            entry.update(res, seconds=round(took, 1))
            write_report(report, out_dir)
            pack_logs(logdir, out_dir)
            print(f"gpu_check: {step.name}: {entry['status']} ({took:.0f} s of {limit:.0f}): "
                  f"{entry['summary']}", flush=True)
    except KeyboardInterrupt:
        report["status"] = "interrupted"
        report["exit_status"] = 1
        write_report(report, out_dir)
        return 1
    failed = [e["name"] for e in report["steps"] if e["status"] != "passed"]
    report["status"] = "failed" if failed else "passed"
    report["exit_status"] = 1 if failed else 0
    write_report(report, out_dir)
    return report["exit_status"]


# ---- entry ---------------------------------------------------------------------------------------

def gpu_reason() -> str | None:
    """None when pyptx can use a GPU here, else why not (pyptx's own probe)."""
    from pyptx.runtime import driver
    reason = driver.probe()
    if reason is None:
        try:
            from pyptx.runtime.profile import gpu_profile
            gpu_profile()                        # a GPU too old for pyptx is no GPU
        except Exception as e:  # noqa: BLE001
            reason = str(e)
    return reason


def _terminated(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check",
                                 description="The one-command GPU check: info, the test-suite, "
                                             "the examples, GPU timings against peers and the "
                                             "llama model's tokens/s, each within a budget.")
    ap.add_argument("--out", default="gpu_check_out", help="report folder (default %(default)s)")
    ap.add_argument("--logs", default=None,
                    help="folder of the steps' full output (default OUT/logs); all of it is "
                         "also packed into OUT/gpu_check_logs.tar.gz after every step")
    ap.add_argument("--minutes", type=float, default=8.0,
                    help="wall-clock budget of the whole check (default %(default)s)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    ap.add_argument("--only", action="append", choices=[n for n, _ in WEIGHTS],
                    help="run only these steps (repeatable); their shares fill the minutes")
    args = ap.parse_args(argv)
    if args.minutes <= 0:
        ap.error("--minutes must be positive")
    steps = plan(args.minutes, args.only)
    if args.dry_run:
        print_plan(steps, args.minutes, args.out)
        return 0
    reason = gpu_reason()
    if reason is not None:
        print("gpu_check: no GPU, nothing checked: " + " ".join(reason.split()), file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminated)
    command = "python -m benchmarks.gpu_check " + " ".join(
        sys.argv[1:] if argv is None else argv)
    return run_check(steps, args.out, collect_header(), command.strip(), logdir=args.logs)


if __name__ == "__main__":
    sys.exit(main())
