"""The on-disk cache of compiled kernels (`$PYPTX_CACHE_DIR`, default `~/.cache/pyptx`).

One JSON file per key.  The key hashes pyptx's own sources and Python's version, the kernel's
name, arch, options, parameter types, constexpr values and everything the kernel reads
(`cachekey.render`).  An entry stores its key and a checksum of its content; an entry that
cannot be read or whose key or checksum does not match is a miss (and is then overwritten), never an error and never a wrong kernel.
`PYPTX_NO_CACHE=1` turns the cache off.  A cache that cannot be written is not an error either
(the kernel is compiled and used), but it says so once per process with a `CacheWarning`: every
new process then pays the full compile, and that should not be a mystery.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile

_self_hash: list = []
_warned: list = []          # non-empty once this process has issued its CacheWarning


def compiler_hash() -> str:
    """Hash of pyptx's own sources, so a changed compiler never reads stale cache entries."""
    if not _self_hash:
        h = hashlib.sha256(sys.version.encode())
        root = os.path.dirname(__file__)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for fn in sorted(filenames):
                if fn.endswith((".py", ".lark")):
                    with open(os.path.join(dirpath, fn), "rb") as f:
                        h.update(fn.encode() + f.read())
        _self_hash.append(h.hexdigest()[:16])
    return _self_hash[0]


def cache_dir() -> str | None:
    if os.environ.get("PYPTX_NO_CACHE", "") not in ("", "0"):
        return None
    return os.environ.get("PYPTX_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "pyptx")


def key(parts) -> str:
    h = hashlib.sha256()
    for part in (compiler_hash(), *parts):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def path_of(cdir: str, k: str) -> str:
    return os.path.join(cdir, k[:2], k + ".json")


def _checksum(content: dict) -> str:
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def load(path: str, k: str) -> dict | None:
    """The stored content for key `k`, or None for anything but an intact entry of that key."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        content = d["content"]
        if d["key"] != k or d["checksum"] != _checksum(content):
            return None
        return content
    except Exception:  # noqa: BLE001 - a missing, unreadable or damaged entry is simply a miss
        return None


def store(path: str, k: str, content: dict) -> None:
    d = dict(key=k, checksum=_checksum(content), content=content)
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(d, f)
        os.replace(tmp, path)      # atomic: readers see the old entry or the new one
    except OSError as e:           # an unwritable cache is not an error, but it is said once
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        _warn_unwritable(os.path.dirname(os.path.dirname(path)), e)


def _warn_unwritable(cdir: str, e: OSError) -> None:
    if _warned:
        return
    _warned.append(True)
    import warnings
    from .errors import CacheWarning
    why = f"{e.strerror}: {e.filename!r}" if e.strerror and e.filename else str(e)
    warnings.warn(
        f"pyptx cannot write its kernel cache in {cdir!r} ({why}); kernels compile and run but "
        "are not cached on disk, so every new process compiles them again.  Make the directory "
        "writable, point PYPTX_CACHE_DIR at a writable directory, or set PYPTX_NO_CACHE=1 to "
        "turn the disk cache off", CacheWarning, stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    """The stacklevel of the first caller outside pyptx (a launch and `pyptx.compile` reach the
    cache through different depths), so the warning points at the user's line."""
    root = os.path.dirname(os.path.abspath(__file__)) + os.sep
    f, level = sys._getframe(1), 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(root):
        f, level = f.f_back, level + 1
    return level
