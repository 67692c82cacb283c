"""Reading a PYPTX_* environment variable on every launch, cheaply.

The launch path reads `PYPTX_DEVICE` and `PYPTX_SANITIZE` at each launch (tests and users change
them between launches), and `os.environ.get` (key encoding + value decoding) costs about a
microsecond.  CPython's `os.environ` keeps its encoded copy in `_data`, a plain dict kept in step
by every `os.environ[...] = ...` / `monkeypatch.setenv`; elsewhere fall back to `os.environ.get`.
"""
from __future__ import annotations

import os


def env_reader(name: str):
    """A function returning `os.environ.get(name)`, as cheap as the platform allows."""
    try:
        data, key, decode = os.environ._data, os.environ.encodekey(name), os.environ.decodevalue
    except AttributeError:                                  # not CPython's os._Environ
        return lambda: os.environ.get(name)
    if not isinstance(data, dict):
        return lambda: os.environ.get(name)

    def get():
        v = data.get(key)
        return None if v is None else decode(v)
    return get
