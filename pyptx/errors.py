"""Every exception pyptx raises on purpose.  Users catch `PyptxError` to catch them all."""
from __future__ import annotations


class PyptxError(Exception):
    """Base class of every pyptx exception."""


class CompileError(PyptxError, SyntaxError):
    """Bad user code.  Points at the user's file, line and column (1-based line, 1-based col).

    `str(err)` is ``file:line:col: message`` followed by the source line and a caret; an error
    about an argument rather than a place in the code (``arch='sm_50'``) is just the message.
    """

    def __init__(self, message: str, filename: str | None = None, lineno: int | None = None,
                 offset: int | None = None, source_line: str | None = None):
        SyntaxError.__init__(self, message)
        self.msg = message
        self.filename = filename
        self.lineno = lineno
        self.offset = offset
        self.text = source_line

    def __str__(self) -> str:
        if self.filename is None and self.lineno is None:
            return str(self.msg)        # about an argument (arch=, ...), not a place in code
        where = f"{self.filename or '<unknown>'}:{self.lineno or 0}:{self.offset or 0}"
        out = f"{where}: {self.msg}"
        if self.text:
            line = self.text.rstrip("\n")
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            col = max((self.offset or 1) - 1 - indent, 0)
            out += f"\n    {stripped}\n    {' ' * col}^"
        return out


class LaunchError(PyptxError):
    """A launch that cannot run: bad arguments, bad geometry, partial barriers, unknown PTX."""


class DeviceError(PyptxError):
    """The GPU/driver failed or is missing.  Carries the driver's error name and JIT log."""

    def __init__(self, message: str, error_name: str | None = None, jit_log: str | None = None):
        super().__init__(message)
        self.error_name = error_name
        self.jit_log = jit_log


class DeviceWarning(PyptxError, RuntimeWarning):
    """`PYPTX_DEVICE=auto` fell back to the CPU executor although an NVIDIA driver is installed
    (driver too old for the installed cuda-python, no visible device, cuInit failed, ...).
    Issued once per process; the message names the reason and the fix."""


class CacheWarning(PyptxError, UserWarning):
    """The on-disk kernel cache (`PYPTX_CACHE_DIR`, default `~/.cache/pyptx`) cannot be written:
    kernels still compile, but every new process compiles them again.  Issued once per process,
    naming the directory, the OS error and the fix, so a slow start is not a mystery."""


class MemoryFault(PyptxError):
    """An out-of-bounds access caught by the CPU executor's memcheck."""

    def __init__(self, message: str, *, kernel: str | None = None, ptx_line: int | None = None,
                 source_line: int | None = None, block=None, thread=None, address: int | None = None,
                 space: str | None = None, nearest: str | None = None):
        super().__init__(message)
        self.kernel = kernel
        self.ptx_line = ptx_line
        self.source_line = source_line
        self.block = block
        self.thread = thread
        self.address = address
        self.space = space
        self.nearest = nearest


class ToolchainError(PyptxError):
    """No ptxas was found, or ptxas rejected the PTX."""


class SanitizerError(MemoryFault):
    """A checked launch (`pyptx.sanitize`) found a data race (`.kind == "race"`) or a read of
    shared/local memory that nothing wrote in this launch (`.kind == "uninitialized"`).

    Besides MemoryFault's fields (the thread that made the second access) it carries the other
    access of a race: `other_block`, `other_thread`, `other_ptx_line`, `other_source_line`."""

    def __init__(self, message: str, *, kind: str, other_block=None, other_thread=None,
                 other_ptx_line: int | None = None, other_source_line: int | None = None,
                 **fields):
        super().__init__(message, **fields)
        self.kind = kind
        self.other_block = other_block
        self.other_thread = other_thread
        self.other_ptx_line = other_ptx_line
        self.other_source_line = other_source_line
