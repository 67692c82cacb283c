"""ptxas: find it, assemble PTX with it, read its resource report.

Why separate: compiling never needs ptxas (pyptx emits PTX itself); ptxas is only the validator
and the source of `resources()`.  So nothing here runs on the compile path, everything is lazy,
and a missing ptxas is a `ToolchainError` only when someone asks for it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache

from .errors import ToolchainError

_NOT_FOUND = ("no ptxas found: install the CUDA toolkit or `pip install nvidia-cuda-nvcc`, "
              "or point $PYPTX_PTXAS at a ptxas binary")


_found: dict = {}           # $PYPTX_PTXAS value -> ptxas path (hits only: a later install counts)


def _find_cached(env_value: str | None) -> str | None:
    hit = _found.get(env_value)
    if hit is None:
        hit = _lookup(env_value)
        if hit is not None:
            _found[env_value] = hit
    return hit


def _lookup(env_value: str | None) -> str | None:
    if env_value:
        return env_value if os.path.isfile(env_value) and os.access(env_value, os.X_OK) else None
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
        found = find_nvidia_binary_utility("ptxas")
        if found:
            return str(found)
    except Exception:  # noqa: BLE001 - pathfinder missing or unable: fall back to PATH
        pass
    return shutil.which("ptxas")


def find_ptxas() -> str | None:
    """`$PYPTX_PTXAS`, else cuda.pathfinder's ptxas (wheel or toolkit), else `ptxas` on PATH."""
    return _find_cached(os.environ.get("PYPTX_PTXAS") or None)


def _ptxas() -> str:
    exe = find_ptxas()
    if exe is None:
        raise ToolchainError(_NOT_FOUND)
    return exe


def _run(args: list[str], ptx: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="pyptx_ptxas_") as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        try:
            return subprocess.run([_ptxas(), *args, "-o", os.path.join(tmp, "kernel.cubin"),
                                   src], capture_output=True, text=True, timeout=300)
        except OSError as e:
            raise ToolchainError(f"could not run ptxas: {e}") from None
        except subprocess.TimeoutExpired:
            raise ToolchainError("ptxas did not finish within 300 s") from None


def assemble(ptx: str, arch: str, *, verbose: bool = False) -> str:
    """Assemble `ptx` for `arch`; returns ptxas's log.  ToolchainError if ptxas rejects it."""
    args = [f"-arch={arch}"] + (["-v"] if verbose else [])
    proc = _run(args, ptx)
    log = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise ToolchainError(f"ptxas -arch={arch} failed (exit {proc.returncode}):\n{log}")
    return log


_RES = {
    "registers": re.compile(r"Used (\d+) registers"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "shared_bytes": re.compile(r"(\d+) bytes smem"),
    "local_bytes": re.compile(r"(\d+) bytes stack frame"),
}


def parse_resources(log: str, entry: str | None = None) -> dict:
    """The entry's numbers from a `ptxas -v` log (the first entry when `entry` is None)."""
    section = log
    starts = [m for m in re.finditer(r"Compiling entry function '([^']+)'", log)]
    if starts:
        chosen = next((m for m in starts if entry is None or m.group(1) == entry), starts[0])
        nxt = [m.start() for m in starts if m.start() > chosen.start()]
        section = log[chosen.start():nxt[0] if nxt else len(log)]
    out = {}
    for key, rx in _RES.items():
        m = rx.search(section)
        out[key] = int(m.group(1)) if m else 0
    # "N bytes lmem" also counts local memory when there is no stack frame line
    m = re.search(r"(\d+) bytes lmem", section)
    if m:
        out["local_bytes"] = max(out["local_bytes"], int(m.group(1)))
    return out


def resources(ptx: str, arch: str) -> dict:
    """registers, spill_stores, spill_loads, shared_bytes, local_bytes of the entry (`ptxas -v`)."""
    m = re.search(r"\.entry\s+([\w$]+)", ptx)
    return parse_resources(assemble(ptx, arch, verbose=True), m.group(1) if m else None)


@lru_cache(maxsize=None)
def _version_of(exe: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def ptxas_version() -> tuple[int, int]:
    """(major, minor) of the CUDA release the ptxas belongs to, e.g. (13, 0)."""
    v = _version_of(_ptxas())
    if v is None:
        raise ToolchainError(f"cannot read the version of {_ptxas()}")
    return v


#: CUDA release -> the highest PTX ISA its ptxas reads (NVIDIA's release notes); the fallback
#: when ptxas does not name its ISA in the probe below
_ISA_BY_CUDA = ((13, 1, "9.1"), (13, 0, "9.0"), (12, 9, "8.8"), (12, 8, "8.7"), (12, 7, "8.6"),
                (12, 5, "8.5"), (12, 4, "8.4"), (12, 3, "8.3"), (12, 2, "8.2"), (12, 1, "8.1"),
                (12, 0, "8.0"), (11, 8, "7.8"))


@lru_cache(maxsize=None)
def _max_isa_of(exe: str) -> str:
    probe = ".version 99.9\n.target sm_80\n.address_size 64\n.visible .entry k() { ret; }\n"
    with tempfile.TemporaryDirectory(prefix="pyptx_ptxas_") as tmp:
        src = os.path.join(tmp, "probe.ptx")
        with open(src, "w", encoding="utf-8") as f:
            f.write(probe)
        try:
            proc = subprocess.run([exe, "-arch=sm_80", "-o", os.path.join(tmp, "p.cubin"), src],
                                  capture_output=True, text=True, timeout=60)
            m = re.search(r"current version is '(\d+\.\d+)'", proc.stdout + proc.stderr)
            if m:
                return m.group(1)
        except (OSError, subprocess.TimeoutExpired):
            pass
    v = _version_of(exe) or (0, 0)
    for major, minor, isa in _ISA_BY_CUDA:
        if v >= (major, minor):
            return isa
    return "7.0"


def max_ptx_isa() -> str:
    """The highest `.version` the local ptxas accepts, e.g. '9.0' for CUDA 13.0."""
    return _max_isa_of(_ptxas())
