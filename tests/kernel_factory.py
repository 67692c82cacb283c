"""Make real kernels from source text in tests (written to a file, so `inspect.getsource` works)."""
from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import textwrap

_DIR = tempfile.mkdtemp(prefix="pyptx_test_kernels_")
atexit.register(shutil.rmtree, _DIR, True)
_cache: dict[str, object] = {}


def load_module(src: str):
    """Import `src` as a fresh module from a real file (cached by content)."""
    src = textwrap.dedent(src)
    key = hashlib.sha256(src.encode()).hexdigest()[:20]
    if key in _cache:
        return _cache[key]
    name = f"pyptx_test_mod_{key}"
    path = os.path.join(_DIR, name + ".py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    _cache[key] = mod
    return mod


def make_kernel(src: str, name: str | None = None):
    """The object called `name` (default: the first `def`) in the module made from `src`."""
    mod = load_module(src)
    if name is None:
        for line in textwrap.dedent(src).splitlines():
            if line.startswith("def "):
                name = line[4:line.index("(")].strip()
                break
    return getattr(mod, name)
