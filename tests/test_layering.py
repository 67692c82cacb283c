"""Stages depend one way: frontend → ir → passes → ptx → compiler API → runtime.  Importing any
module of the compiler side must not import `pyptx.runtime` (each checked in a fresh process)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _modules():
    out = ["pyptx.compiler", "pyptx.target", "pyptx.kernel"]
    for pkg in ("frontend", "ir", "passes", "ptx"):
        folder = os.path.join(ROOT, "pyptx", pkg)
        out.append(f"pyptx.{pkg}")
        out += [f"pyptx.{pkg}.{f[:-3]}" for f in sorted(os.listdir(folder))
                if f.endswith(".py") and f != "__init__.py"]
    return out


def test_every_stage_module_is_listed():
    assert len(_modules()) > 20 and "pyptx.ptx.emitter" in _modules()


def test_compiler_side_never_imports_the_runtime():
    """One fresh process imports every module in turn and checks after each import, so the
    first module that pulls in the runtime is the one named."""
    code = ("import importlib, sys\n"
            f"for m in {_modules()!r}:\n"
            "    importlib.import_module(m)\n"
            "    rt = sorted(n for n in sys.modules if n.startswith('pyptx.runtime'))\n"
            "    assert not rt, (m, rt)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_compiling_with_the_default_arch_never_imports_the_runtime():
    code = ("import sys, pyptx\n"
            "from pyptx import f32\n"
            "import layering_kernel as k\n"
            "ck = pyptx.compile(k.copy)\n"
            "assert ck.arch == 'sm_80', ck.arch\n"
            "rt = sorted(n for n in sys.modules if n.startswith('pyptx.runtime'))\n"
            "assert not rt, rt\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]),
           "PYPTX_NO_CACHE": "1", "PYPTX_DEVICE": "cpu"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
