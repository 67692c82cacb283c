"""`python -m benchmarks.gpu_check`: the one-command GPU check's plumbing, without a GPU.

No GPU → one line and exit 2; `--dry-run` → the plan with budgets that fit the minutes; the
orchestrator (with injected steps and runners): a failing step → exit 1 and reports naming it, a
step past its budget killed with its whole process group, reports rewritten after every step; the
pytest summary parsers on real pytest output; the timings module end to end on the fake driver.
No timing is asserted (speed lives in the benchmark output).
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import gpu_check as gc  # noqa: E402
from benchmarks import gpu_timings as gt  # noqa: E402
import numpy as np  # noqa: E402
import pyptx  # noqa: E402
from pyptx.runtime import driver  # noqa: E402

PY = sys.executable
STEPS = [n for n, _ in gc.WEIGHTS]


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH",
                                                                                  "")]))
    env.pop("PYPTX_DEVICE", None)
    env.update(extra)
    return env


# ---- no GPU --------------------------------------------------------------------------------------

def test_without_a_gpu_it_says_why_in_one_line_and_exits_2(tmp_path):
    reason = driver.probe()
    if reason is None:
        pytest.skip("a GPU is present: the check would run")
    out = tmp_path / "out"
    res = subprocess.run([PY, "-m", "benchmarks.gpu_check", "--out", str(out)], cwd=ROOT,
                         env=_env(), capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    lines = (res.stdout + res.stderr).strip().splitlines()
    assert len(lines) == 1, lines
    assert "no GPU" in lines[0] and " ".join(reason.split()) in lines[0]
    assert not out.exists()                      # nothing ran, nothing written


def test_the_probe_decides_in_process(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(driver, "probe", lambda: "no CUDA device: planted\n  reason")

    def never(*a, **k):
        raise AssertionError("no step may run without a GPU")
    monkeypatch.setattr(gc, "run_check", never)
    assert gc.main(["--out", str(tmp_path / "out")]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.count("\n") == 1 and "no GPU" in cap.err and "planted reason" in cap.err


# ---- the plan ------------------------------------------------------------------------------------

def _plan_budgets(text: str) -> dict:
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^\s+(\w+)\s+(\d+) s\s", text, re.M)}


def test_dry_run_lists_every_step_with_a_budget_within_the_minutes(tmp_path):
    res = subprocess.run([PY, "-m", "benchmarks.gpu_check", "--dry-run", "--out",
                          str(tmp_path)], cwd=ROOT, env=_env(), capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    b8 = _plan_budgets(res.stdout)
    assert list(b8) == STEPS and all(v >= 1 for v in b8.values())
    assert sum(b8.values()) <= 8 * 60
    assert "python -m pyptx info" in res.stdout and "pytest" in res.stdout
    assert all(os.path.basename(p) in res.stdout for p in gc.example_paths())
    assert not (tmp_path / "gpu_check.md").exists()


def test_dry_run_scales_with_minutes_and_needs_no_gpu(monkeypatch, capsys):
    def no_probe():
        raise AssertionError("--dry-run must not probe the GPU")
    monkeypatch.setattr(driver, "probe", no_probe)
    assert gc.main(["--dry-run", "--minutes", "4"]) == 0
    b4 = _plan_budgets(capsys.readouterr().out)
    assert gc.main(["--dry-run"]) == 0
    b8 = _plan_budgets(capsys.readouterr().out)
    assert list(b4) == STEPS and sum(b4.values()) <= 4 * 60
    for name in STEPS:
        assert abs(2 * b4[name] - b8[name]) <= 2, (name, b4, b8)
    assert b4 == gc.budgets(4) and b8 == gc.budgets(8)
    assert list(gc.budgets(8, only=["timings"])) == ["timings"]


# ---- the orchestrator with injected steps --------------------------------------------------------

def plain(results):
    r = results[0]
    status = "timed out" if r.timed_out else ("passed" if r.rc == 0 else "failed")
    return {"status": status, "summary": r.stdout.strip(), "details": {"rc": r.rc}, "md": ""}


def py_step(name, code, budget=30.0):
    return gc.Step(name, budget, code, lambda: [gc.Command(name, [PY, "-c", code])], plain)


def _report(out):
    return json.loads((out / "gpu_check.json").read_text()), (out / "gpu_check.md").read_text()


def test_a_failing_step_fails_the_check_and_the_reports_say_which(tmp_path):
    steps = [py_step("first", "print('fine')"),
             py_step("broken", "import sys; print('bad'); sys.exit(3)"),
             py_step("last", "print('still runs')")]
    assert gc.run_check(steps, str(tmp_path), {"device": "Fake GPU"}) == 1
    rep, md = _report(tmp_path)
    status = {s["name"]: s["status"] for s in rep["steps"]}
    assert status == {"first": "passed", "broken": "failed", "last": "passed"}
    assert rep["status"] == "failed" and rep["exit_status"] == 1
    assert "FAILED (broken)" in md and "| broken |" in md and "still runs" in md
    assert (tmp_path / "logs" / "broken.out").read_text().strip() == "bad"


def test_all_steps_passing_exits_0(tmp_path):
    steps = [py_step("a", "print(1)"), py_step("b", "print(2)")]
    assert gc.run_check(steps, str(tmp_path), {}) == 0
    rep, md = _report(tmp_path)
    assert rep["status"] == "passed" and "**PASSED**" in md


def _gone(pid: int) -> bool:
    """Not running: no such process, or a zombie waiting for its (new) parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to see the processes die")
def test_a_step_past_its_budget_is_killed_with_its_children(tmp_path):
    pids = tmp_path / "pids"
    sleeper = ("import os, subprocess, sys, threading\n"
               "kid = subprocess.Popen([sys.executable, '-c', "
               "'import threading; threading.Event().wait(600)'])\n"
               f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{kid.pid}}')\n"
               "threading.Event().wait(600)\n")
    steps = [py_step("sleepy", sleeper, budget=1), py_step("after", "print('next step ran')")]
    assert gc.run_check(steps, str(tmp_path / "out"), {}) == 1
    rep, md = _report(tmp_path / "out")
    assert [s["status"] for s in rep["steps"]] == ["timed out", "passed"]
    assert "**timed out**" in md and "next step ran" in md
    for pid in map(int, pids.read_text().split()):
        assert _gone(pid), pid


def test_the_reports_are_rewritten_after_every_step(tmp_path):
    seen = []

    def runner(cmd, timeout, logdir):
        rep, md = _report(tmp_path)              # what a kill at this moment would leave
        seen.append(([s["status"] for s in rep["steps"]], rep["status"], "RUNNING" in md))
        return gc.Result(cmd.label, 0 if cmd.label != "two" else 1, False, 0.5, "out", "", "")
    steps = [gc.Step(n, 10, "", lambda n=n: [gc.Command(n, ["true"])], plain)
             for n in ("one", "two", "three")]
    assert gc.run_check(steps, str(tmp_path), {}, runner=runner) == 1
    assert seen == [(["pending", "pending", "pending"], "running", True),
                    (["passed", "pending", "pending"], "running", True),
                    (["passed", "failed", "pending"], "running", True)]
    rep, _ = _report(tmp_path)
    assert [s["status"] for s in rep["steps"]] == ["passed", "failed", "passed"]


def test_budgets_bound_each_command_and_unused_time_carries_over(tmp_path):
    got = []

    def runner(cmd, timeout, logdir):
        got.append((cmd.label, timeout))
        return gc.Result(cmd.label, 0, False, 0.0, "", "", "")
    steps = [gc.Step("a", 10, "", lambda: [gc.Command("a", ["true"])], plain),
             gc.Step("b", 20, "", lambda: [gc.Command("b1", ["true"], cap=5),
                                           gc.Command("b2", ["true"])], plain)]
    assert gc.run_check(steps, str(tmp_path), {}, runner=runner) == 0
    (la, ta), (lb1, tb1), (lb2, tb2) = got
    assert ta <= 10 and tb1 <= 5 and 20 < tb2 <= 30   # b gets what a left unused


def test_an_interrupted_check_leaves_reports_and_fails(tmp_path):
    def runner(cmd, timeout, logdir):
        raise KeyboardInterrupt
    steps = [py_step("a", "print(1)")]
    assert gc.run_check(steps, str(tmp_path), {}, runner=runner) == 1
    rep, md = _report(tmp_path)
    assert rep["status"] == "interrupted" and "INTERRUPTED" in md


def test_a_broken_parser_is_reported_not_raised(tmp_path):
    def parse(results):
        raise ValueError("parser bug")
    steps = [gc.Step("x", 10, "", lambda: [gc.Command("x", [PY, "-c", "pass"])], parse)]
    assert gc.run_check(steps, str(tmp_path), {}) == 1
    rep, _ = _report(tmp_path)
    assert rep["steps"][0]["status"] == "failed" and "parser bug" in rep["steps"][0]["summary"]


def test_examples_report_missing_modules_and_unrun_examples():
    res = [gc.Result("example-a.py", 0, False, 1.0, "x\nPASS (on the gpu)\n", ""),
           gc.Result("example-b.py", 1, False, 1.0, "",
                     "Traceback ...\nModuleNotFoundError: No module named 'gguf'\n"),
           gc.Result("example-c.py", None, True, 0.0, "", "not run: the step's budget was spent")]
    out = gc.parse_examples(res)
    assert out["status"] == "timed out"
    assert out["details"]["a.py"]["status"] == "passed"
    assert out["details"]["b.py"]["status"] == "failed"
    assert "missing module 'gguf'" in out["details"]["b.py"]["note"]
    assert out["details"]["c.py"]["status"] == "not run"
    assert "PASS (on the gpu)" in out["md"] and "Traceback" not in out["summary"]


# ---- pytest output -------------------------------------------------------------------------------

@pytest.mark.parametrize("line, want", [
    ("3 failed, 2940 passed, 6 skipped in 300.1s",
     {"failed": 3, "passed": 2940, "skipped": 6, "seconds": 300.1}),
    ("1 error in 0.52s", {"error": 1, "seconds": 0.52}),
    ("==== 1 failed, 1 passed, 1 skipped, 1 xfailed in 0.48s ====",
     {"failed": 1, "passed": 1, "skipped": 1, "xfailed": 1, "seconds": 0.48}),
    ("2940 passed, 6 skipped, 12 deselected, 3 warnings in 61.02s (0:01:01)",
     {"passed": 2940, "skipped": 6, "deselected": 12, "warnings": 3, "seconds": 61.02}),
    ("1 failed, 2 errors, 1 xpassed, 1 warning in 2.00s",
     {"failed": 1, "error": 2, "xpassed": 1, "warnings": 1, "seconds": 2.0}),
    ("no tests ran in 0.01s", {"seconds": 0.01}),
])
def test_pytest_summary_lines(line, want):
    assert gc.parse_pytest_summary(f"some output\n{line}\n") == want


def test_pytest_xdist_output():
    text = ("============================= test session starts ==============================\n"
            "platform linux -- Python 3.12.3, pytest-8.4.1, pluggy-1.6.0\n"
            "created: 16/16 workers\n16 workers [2949 items]\n\n"
            "........................F.............s......... [  1%]\n"
            "[gw3] node down: Not properly terminated\n"
            "replacing crashed worker gw3\n"
            "........E...x............................ [100%]\n"
            "=========================== short test summary info ============================\n"
            "FAILED tests/test_graph.py::test_replay[gpu] - AssertionError: assert 1 == 2\n"
            "ERROR tests/test_dlpack.py::test_torch - RuntimeError: CUDA error\n"
            "FAILED tests/test_graph.py::test_replay[gpu] - AssertionError: assert 1 == 2\n"
            "[gw3] [ 50%] FAILED tests/test_x.py::test_crash\n"
            "1 failed, 2940 passed, 6 skipped, 1 error in 61.02s (0:01:01)\n")
    assert gc.parse_pytest_summary(text) == {"failed": 1, "passed": 2940, "skipped": 6,
                                             "error": 1, "seconds": 61.02}
    assert gc.parse_pytest_failures(text) == ["tests/test_graph.py::test_replay[gpu]",
                                              "tests/test_dlpack.py::test_torch"]
    out = gc.parse_suite([gc.Result("suite", 1, False, 62.0, text, "", "logs/suite.out")])
    assert out["status"] == "failed"
    assert out["details"]["crashes"][0] == "[gw3] node down: Not properly terminated"
    assert "tests/test_dlpack.py::test_torch" in out["md"]


def test_no_summary_is_not_a_summary():
    assert gc.parse_pytest_summary("took 3 tries in 2.0s\nall 5 passed quickly in 1s\n") is None
    assert gc.parse_pytest_summary("") is None


def test_a_killed_suite_reports_its_progress():
    text = "....F.s.. [ 10%]\n..x......E [ 20%]\n...."
    assert gc.parse_pytest_progress(text) == {"passed": 19, "failed": 1, "skipped": 1,
                                              "xfailed": 1, "error": 1}
    out = gc.parse_suite([gc.Result("suite", None, True, 240.0, text, "", "logs/suite.out")])
    assert out["status"] == "timed out"
    assert "timed out after 240 s" in out["summary"] and "19 passed" in out["summary"]


def test_real_pytest_output_is_parsed(tmp_path):
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "@pytest.fixture\n"
        "def broken():\n"
        "    raise RuntimeError('fixture')\n"
        "def test_ok(): pass\n"
        "def test_bad(): assert 1 == 2\n"
        "@pytest.mark.skip\n"
        "def test_skipped(): pass\n"
        "@pytest.mark.xfail\n"
        "def test_xfail(): assert 0\n"
        "def test_error(broken): pass\n")
    res = subprocess.run([PY, "-m", "pytest", "-q", "-rfE", "--tb=short", "-p",
                          "no:cacheprovider", "test_sample.py"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env=_env())
    counts = gc.parse_pytest_summary(res.stdout)
    assert {k: v for k, v in counts.items() if k != "seconds"} == {
        "failed": 1, "passed": 1, "skipped": 1, "xfailed": 1, "error": 1}, res.stdout
    assert gc.parse_pytest_failures(res.stdout) == ["test_sample.py::test_bad",
                                                    "test_sample.py::test_error"]
    assert gc.parse_pytest_progress(res.stdout) == {"passed": 1, "failed": 1, "skipped": 1,
                                                    "xfailed": 1, "error": 1}


def test_the_suite_command_uses_xdist_and_timeouts_where_installed(monkeypatch):
    monkeypatch.setattr(gc, "_module_present", lambda m: True)
    argv = gc.suite_argv()
    assert argv[1:3] == ["-m", "pytest"] and "-n" in argv and "-rfE" in argv
    assert any(a.startswith("--timeout=") for a in argv)
    monkeypatch.setattr(gc, "_module_present", lambda m: False)
    assert "-n" not in gc.suite_argv()


# ---- the timings module on the fake driver -------------------------------------------------------

def test_timings_run_end_to_end_on_the_fake_driver(monkeypatch):
    """Every row is measured and formatted; the fake runs no kernel bodies, so the numbers and
    the result checks are meaningless here: only the plumbing is tested."""
    pytest.importorskip("gguf")
    from fake_driver import R, FakeDriver
    from fake_graph import GraphCapture
    from benchmarks import bench_launch

    class Fake(GraphCapture, FakeDriver):
        def cuMemcpyDtoDAsync(self, dst, src, n, stream):
            return (self._call("cuMemcpyDtoDAsync", dst, src, n, stream) or R.CUDA_SUCCESS,)

    def no_peer(*a):
        raise ImportError("no peer in this test")
    monkeypatch.setattr(bench_launch, "peer", no_peer)
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(Fake(cc=(9, 0), record=False, run_ptxas=False))
    try:
        peers = {"torch": None, "cupy": None, "why": {"torch": "torch not installed",
                                                      "cupy": "cupy not installed"}}
        rows = []
        gt.run_jobs(gt.kernel_jobs(True, peers), rows.append)
        gt.run_jobs([("decode", lambda: gt.decode_rows(True))], rows.append)
    finally:
        driver.set_driver(prev)
    assert [r for r in rows if r.get("error")] == []
    assert len(rows) == 12
    for r in rows:
        assert r["ours"] > 0 and r["unit"] in ("TFLOP/s", "GB/s", "µs/launch", "tokens/s")
    assert rows[0]["peer"] == "absent (torch not installed; cupy not installed)"
    assert rows[4]["peer"].startswith("cuMemcpyDtoDAsync") and rows[4]["speedup"] > 0
    assert rows[5]["peer"].startswith("absent")
    text = "\n".join(gt.ROW_PREFIX + json.dumps(r) for r in rows)
    parsed = gt.parse_rows("noise\n" + text + "\nmore noise")
    assert parsed == json.loads(json.dumps(rows))
    table = gt.format_rows(parsed)
    assert table.count("\n| ") >= 9 and "tokens/s" in table


def test_a_failing_row_is_an_error_row_and_the_others_run():
    def boom():
        raise ModuleNotFoundError("No module named 'gguf'", name="gguf")
    rows = []
    ok = gt.run_jobs([("bad", boom), ("good", lambda: {"name": "good", "ok": True})],
                     rows.append)
    assert not ok and [r["name"] for r in rows] == ["bad", "good"]
    assert "missing module 'gguf'" in rows[0]["error"]
    assert "**error**" in gt.format_rows(rows)


def test_logs_go_where_asked_and_into_one_tarball(tmp_path):
    import tarfile
    steps = [py_step("a", "print('hello')")]
    assert gc.run_check(steps, str(tmp_path / "out"), {}, logdir=str(tmp_path / "elsewhere")) == 0
    assert (tmp_path / "elsewhere" / "a.out").read_text() == "hello\n"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "gpu_check.json", "gpu_check.md", "gpu_check_logs.tar.gz"]
    with tarfile.open(tmp_path / "out" / "gpu_check_logs.tar.gz") as tar:
        assert tar.extractfile("logs/a.out").read() == b"hello\n"


def test_bench_launch_direct_floor_launches_the_same_kernel(monkeypatch):
    """bench_launch's floor (cuLaunchKernel on a parameter block packed by hand) must launch
    affine with the arguments pyptx would pass: the fake runs it and the result is checked."""
    from fake_driver import FakeDriver
    from benchmarks.bench_launch import affine, direct_launch
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(FakeDriver(run_ptxas=False))
    try:
        x_h = np.arange(1024, dtype=np.float32)
        x = pyptx.to_device(x_h)
        out = pyptx.to_device(np.zeros_like(x_h))
        affine[4, 256](out, x, 3.0, 1024)                  # loads the module
        direct = direct_launch(out, x, 1024)               # a = 2.0, packed by hand
        direct()
        np.testing.assert_array_equal(out.copy_to_host(), 2 * x_h + 1)
    finally:
        driver.set_driver(prev)


def test_decode_profile_runs_on_the_fake_gpu():
    pytest.importorskip("gguf")
    r = subprocess.run([PY, str(ROOT / "tests" / "run_on_fake_gpu.py"),
                        str(ROOT / "benchmarks" / "decode_profile.py"), "--steps", "1",
                        "--top", "3"], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                           [str(ROOT), os.environ.get("PYTHONPATH", "")])))
    assert r.returncode == 0, r.stderr
    assert "== graph replay per token: 1 tokens on gpu" in r.stdout
    assert "== launch by launch: 1 tokens on gpu" in r.stdout
    assert r.stdout.count("Ordered by: internal time") == 2
