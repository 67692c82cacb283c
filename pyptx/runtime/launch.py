"""`k[grid, block](*args)`: bind, check and flatten the arguments, then run on the GPU or the CPU
executor (docs/launching.md).  Everything a launch can get wrong is raised here as `LaunchError`, before
anything runs, on both devices alike.

Speed: all per-kernel work (resolving parameter types, compiling, building one checker per
argument) happens once per distinct launch *signature* and is kept in a `_Plan`; a repeated
launch costs a dict lookup plus one small checker call per argument.  The plan and its
per-argument checkers live in `arg_checks.py`; this module is the launch itself.
"""
from __future__ import annotations

import inspect
import operator
import os
import threading

import numpy as np

from .. import types as T
from ..target import runs_on
from ..errors import CompileError, DeviceError, LaunchError
from . import checking, profile
from .arg_checks import _DL_GPU, _Plan, _Strided, _cai_strided, _capturing, _launch_state
from .envvars import env_reader
from .device_array import DeviceArray
from . import driver as _driver
from .driver import current_ordinal
from .streams import stream_handle

_MAX_BLOCK = (1024, 1024, 64)
_MAX_GRID = (2**31 - 1, 65535, 65535)
_MAX_THREADS = 1024

# ---- device choice ----------------------------------------------------------------------------

_device_cache: dict = {}      # PYPTX_DEVICE value -> ('gpu' | 'cpu', reason the CPU is used)
_generation = [0]             # bumped by driver.reset(): every cached launch plan is stale
_scope = threading.local()    # .stream, .cpu: set by launch_scope for the launches inside it


class launch_scope:
    """`with launch_scope(stream=s, cpu=False):` — launches on this thread without their own
    `stream=` go to `s`, and with `cpu=True` run on the CPU executor whatever `pyptx.device()`
    says.  The stdlib's array layer uses it: a torch/CuPy GPU tensor's call runs on that
    framework's current stream, a `torch.ops.pyptx` op on CPU tensors on the executor.
    Scopes nest (the inner one wins until it ends)."""

    __slots__ = ("stream", "cpu", "_saved")

    def __init__(self, stream=None, cpu: bool = False):
        self.stream, self.cpu = stream, bool(cpu)

    def __enter__(self):
        self._saved = dict(_scope.__dict__)
        _scope.stream, _scope.cpu = self.stream, self.cpu
        return self

    def __exit__(self, *exc) -> bool:
        _scope.__dict__.clear()
        _scope.__dict__.update(self._saved)
        return False


def invalidate_plans() -> None:
    """Forget the device decision and every kernel's launch plans (driver swapped or reset)."""
    _device_cache.clear()
    _device_by_raw.clear()
    _generation[0] += 1


_device_env = env_reader("PYPTX_DEVICE")
_device_by_raw: dict = {}     # raw environment value -> the _device_cache entry


def device() -> str:
    """'gpu' or 'cpu': where launches run (`PYPTX_DEVICE=auto|gpu|cpu`).

    Decided once per process and value of the environment variable.  With `gpu` and no usable
    GPU this raises DeviceError saying why."""
    raw = _device_env()
    hit = _device_by_raw.get(raw)
    if hit is None:
        mode = raw if raw is not None else "auto"
        hit = _device_cache.get(mode)
        if hit is None:
            hit = _device_cache[mode] = _decide(mode)
        _device_by_raw[raw] = hit
    return hit[0]


def device_reason() -> str | None:
    """Why launches run on the CPU executor (None when they run on the GPU or are undecided)."""
    mode = os.environ.get("PYPTX_DEVICE", "auto")
    try:
        device()
    except DeviceError as e:
        return str(e)
    return _device_cache[mode][1]


def _decide(mode: str):
    m = mode.strip().lower() or "auto"
    if m == "cpu":
        return ("cpu", "PYPTX_DEVICE=cpu")
    if m not in ("auto", "gpu"):
        raise DeviceError(f"PYPTX_DEVICE must be auto, gpu or cpu, got {mode!r}")
    from . import driver
    try:
        driver.context()
        profile.gpu_profile()           # a GPU too old for pyptx is no GPU
        return ("gpu", None)
    except DeviceError as e:
        if m == "gpu":
            raise DeviceError(f"PYPTX_DEVICE=gpu but no usable GPU: {e}",
                              error_name=e.error_name, jit_log=e.jit_log) from None
        driver.warn_fallback(e)
        return ("cpu", driver.with_fix(e))


# ---- grid and block ---------------------------------------------------------------------------

_dims_cache: dict = {}
_int_dims: dict = {}          # exact-int grid -> its 3-tuple (filled by _dims)
_int_blocks: dict = {}        # exact-int block -> its 3-tuple


def _dims(value, what: str) -> tuple:
    # cache only exact ints: 1.0 == 1 and (1.0,) == (1,) must not hit an int entry
    t = type(value)
    cacheable = t is int or (t is tuple and all(type(v) is int for v in value))
    if cacheable:
        hit = _dims_cache.get((what, value))
        if hit is not None:
            return hit
    items = value if isinstance(value, tuple) else (value,)
    if not 1 <= len(items) <= 3:
        raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    dims = []
    for v in items:
        if isinstance(v, bool) or isinstance(v, float):
            raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
        try:
            v = operator.index(v)
        except TypeError:
            raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, "
                              f"got {value!r}") from None
        if v < 1:
            raise LaunchError(f"every {what} dimension must be at least 1, got {value!r}")
        dims.append(v)
    dims += [1] * (3 - len(dims))
    out = tuple(dims)
    if what == "block" and out[0] * out[1] * out[2] > _MAX_THREADS:
        raise LaunchError(f"block {out} has {out[0] * out[1] * out[2]} threads, over the "
                          f"limit of {_MAX_THREADS} threads per block")
    limits = _MAX_BLOCK if what == "block" else _MAX_GRID
    for axis, n, lim in zip("xyz", out, limits):
        if n > lim:
            raise LaunchError(f"{what} dimension {axis} is {n}, over the limit {lim}")
    if cacheable:
        if len(_dims_cache) > 4096:
            _dims_cache.clear()
            _int_dims.clear()
            _int_blocks.clear()
        _dims_cache[(what, value)] = out
        if t is int:
            (_int_dims if what == "grid" else _int_blocks)[value] = out
    return out


# ---- the launch -------------------------------------------------------------------------------

def launch(kernel, grid, block, args, stream=None, shared_mem: int = 0) -> None:
    """Check everything, compile (cached), then run `kernel` over `grid` × `block`."""
    g = _int_dims.get(grid) if type(grid) is int else None      # the common case, one lookup
    if g is None:
        g = _dims(grid, "grid")
    b = _int_blocks.get(block) if type(block) is int else None
    if b is None:
        b = _dims(block, "block")
    scope = _scope.__dict__             # empty unless inside launch_scope (the stdlib's calls)
    if scope and stream is None:
        stream = scope["stream"]
    hstream = None if stream is None else stream_handle(stream)   # LaunchError if malformed
    chk = checking.current()            # None unless pyptx.sanitize / pyptx.profile is on
    dev = "cpu" if (chk is not None and chk.sanitizing) or (scope and scope["cpu"]) else device()
    where = dev if dev == "cpu" else _driver._selected.ordinal    # GPU plans are per device
    binder = kernel.__dict__.get("_pyptx_binder")
    if binder is None or binder.generation != _generation[0]:
        binder = kernel.__dict__["_pyptx_binder"] = _Binder(kernel)
    if stream is not None or _launch_state.__dict__:
        _launch_state.stream = stream      # the consumer stream a __dlpack__ argument is told
    plan = binder.plans.get(where) if not binder.dynamic and len(args) == binder.nargs else None
    if plan is None:
        plan = binder.plan(args, dev, where)
    flat = []
    try:
        try:
            for pos, checker in plan.checkers:
                checker(args[pos], flat)
        except _Strided:
            # a non-contiguous argument for a contiguous parameter: the kernel's strided
            # specialisation (compiled once per layout, then kept like any plan)
            flat.clear()
            plan = binder.plan(args, dev, where, strided=True)
            try:
                for pos, checker in plan.checkers:
                    checker(args[pos], flat)
            except _Strided as e:      # a compiled kernel without strided parameters (a
                fail, got = e.args       # hand-built one): the old refusal
                fail(got)
        if shared_mem:
            _check_shared(plan, shared_mem, dev)
        elif plan.static_shared > plan.shared_limit:
            _check_shared(plan, 0, dev)
        capture = _capturing()
        if capture is not None:       # inside `with pyptx.graph()`: recorded (runtime/graph.py)
            stream = capture.record(plan, g, b, args, flat, shared_mem, stream, binder.names)
            if stream is None:
                return
            hstream = stream_handle(stream)
            chk = None     # recorded, not run: nothing to time (a captured event is unreadable)
        elif hstream and hstream != 1 and dev != "cpu":    # not the arrays' home stream
            note_streams(args, hstream)
        run_checked(plan, g, b, flat, shared_mem, dev, hstream, chk)
    except BaseException:
        flat.clear()      # release consumed DLPack tensors now, not when the traceback dies
        raise


def note_streams(args, hstream: int) -> None:
    """DeviceArray arguments of a launch on a stream other than their home (the default
    stream): ordered against their memory's previous and next owners (devmem.used_on)."""
    from .device_array import DeviceArray
    from .devmem import used_on
    for a in args:
        if isinstance(a, tuple):
            note_streams(a, hstream)
        elif isinstance(a, DeviceArray) and a._host is None and a._ptr:
            used_on(a, hstream)


def run_checked(plan, g, b, flat, shared_mem, dev, hstream, chk=None) -> None:
    """Run a launch whose arguments are checked and flattened (also a graph's CPU replay);
    `hstream`: the driver stream handle (GPU), `chk`: the active sanitize/profile state."""
    if dev == "cpu":
        extra = {} if chk is None else {"checks": chk}
        _cpu_launch()(plan.ck.ptx, plan.ck.name, g, b, flat, shared_mem, **extra)
    else:
        launcher = plan.launcher
        if launcher is None or not launcher.ctx.alive:   # first launch, or a forked child
            launcher = plan.gpu_launcher()
        if chk is None:
            launcher(g, b, flat, shared_mem, hstream)
        else:
            checking.gpu_timed(chk, plan.ck.name, g, b,
                               lambda: launcher(g, b, flat, shared_mem, hstream), hstream)


def _check_shared(plan, shared_mem, dev) -> None:
    if isinstance(shared_mem, bool) or not isinstance(shared_mem, (int, np.integer)):
        raise LaunchError(f"shared_mem must be a number of bytes (int), got {shared_mem!r}")
    shared_mem = int(shared_mem)
    if shared_mem < 0:
        raise LaunchError(f"shared_mem must be >= 0, got {shared_mem}")
    total = plan.static_shared + shared_mem
    if total > plan.shared_limit:
        where = "this GPU" if dev == "gpu" else "the CPU executor"
        raise LaunchError(f"{plan.ck.name} needs {plan.static_shared} bytes of static shared "
                          f"memory + {shared_mem} dynamic (shared_mem=) = {total} bytes, over "
                          f"the {plan.shared_limit}-byte limit per block of {where}")


_cpu_entry: list = []


def _cpu_launch():
    if not _cpu_entry:
        from . import cpu
        _cpu_entry.append(cpu.launch)
    return _cpu_entry[0]


# ---- binding arguments to parameters ----------------------------------------------------------

#: the arg_types entry that selects a declared array parameter's strided specialisation
#: (compiler._strided_layouts keeps the declared element type and rank)
_STRIDED = T.ArrayType(T.i32, 0, "A")

#: a type no annotation can produce (0 dimensions: `f32[()]` is refused): marks parameters
#: whose type is inferred at launch (compared by identity)
_UNANNOTATED = T.ArrayType(T.i32, 0)


class _Binder:
    """Per Kernel: which positional arguments there are, which are constexpr or inferred, and
    the plans built so far (keyed by device: 'cpu' or a GPU's ordinal, and the launch-time
    types/values)."""

    def __init__(self, kernel):
        from ..compiler import resolve_param_types
        self.kernel = kernel
        names = list(inspect.signature(kernel.py_func).parameters)
        types = resolve_param_types(kernel.py_func, kernel.signature,
                                    {n: _UNANNOTATED for n in names})
        fixed = kernel.constexprs
        self.names = [n for n in names if n not in fixed]
        self.nargs = len(self.names)
        self.constexpr_pos = [i for i, n in enumerate(self.names) if types[n] is T.constexpr]
        self.infer_pos = [i for i, n in enumerate(self.names) if types[n] is _UNANNOTATED]
        #: declared contiguous array parameters: a non-contiguous argument selects a strided plan
        self.array_pos = [i for i, n in enumerate(self.names) if types[n] is not _UNANNOTATED
                          and isinstance(types[n], T.ArrayType) and types[n].layout == "C"]
        self.dynamic = sorted(self.constexpr_pos + self.infer_pos)
        self.plans: dict = {}
        self.generation = _generation[0]

    def plan(self, args, dev, where=None, strided: bool = False) -> "_Plan":
        """`where`: 'cpu' or the GPU ordinal the plan is for (default: the current one).
        `strided`: a declared array parameter got a non-contiguous argument: the plan of the
        specialisation where exactly those parameters are strided (layout 'A')."""
        if where is None:
            where = dev if dev == "cpu" else current_ordinal()
        if len(args) != self.nargs:
            self._count_error(args)
        lay = [self.names[i] for i in self.array_pos if _is_strided(args[i], dev)] \
            if strided else ()
        if not self.dynamic and not lay:
            plan = self.plans.get(where)
            if plan is None:
                plan = self.plans[where] = self._build(args, dev, {}, {})
            return plan
        cx, inferred = {}, {}
        for i in self.constexpr_pos:
            cx[self.names[i]] = _constexpr_value(self.names[i], args[i])
        for i in self.infer_pos:
            inferred[self.names[i]] = _infer_type(self.names[i], args[i])
        for n in lay:
            inferred[n] = _STRIDED
        key = (where, tuple(cx.items()), tuple(inferred.items()))
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = self._build(args, dev, cx, inferred)
        return plan

    def _count_error(self, args):
        k = self.kernel.name
        if len(args) < self.nargs:
            missing = self.names[len(args):]
            raise LaunchError(f"{k}() is missing {len(missing)} argument(s): "
                              + ", ".join(f"'{n}'" for n in missing))
        extra = len(args) - self.nargs
        raise LaunchError(f"{k}() takes {self.nargs} argument(s) "
                          f"({', '.join(self.names)}) but {len(args)} were given "
                          f"({extra} extra)")

    def _build(self, args, dev, cx, inferred) -> "_Plan":
        from .. import compiler
        arch = device = profile.current_arch() if dev == "gpu" else None  # the device's
        pinned = getattr(self.kernel, "arch", None)
        if pinned is not None:          # @pyptx.kernel(arch=...): that PTX, on the CPU too
            if arch is not None and not runs_on(pinned, arch):
                raise LaunchError(f"{self.kernel.name} is compiled for {pinned} "
                                  f"(@pyptx.kernel(arch={pinned!r})), which does not run on "
                                  f"this GPU ({arch}); launch it on a GPU {pinned} runs on, or "
                                  f"on the CPU executor (PYPTX_DEVICE=cpu)")
            arch = pinned
        for _ in range(3):
            try:
                ck = compiler.compile_kernel(self.kernel, arch=arch, constexprs=cx or None,
                                             arg_types=inferred or None)
                break
            except CompileError as e:
                # a feature of a newer or an arch-specific target (wgmma: sm_90a) on a device
                # that runs it: the CPU executor (any arch), or a GPU of that arch's family
                # (an sm_90 GPU runs sm_90a code)
                want = getattr(e, "needs_arch", None)
                if want is None or not (device is None or runs_on(want, device)):
                    raise
                arch = want
        return _Plan(ck, dev, [i for i in range(self.nargs) if i not in self.constexpr_pos],
                     self.names, self.kernel.name)


def _constexpr_value(name, v):
    if isinstance(v, np.generic) and not isinstance(v, (np.str_, np.bytes_, np.void)):
        v = v.item()
    if not isinstance(v, (bool, int, float)):
        raise LaunchError(f"argument '{name}' is a constexpr parameter: pass an int, float or "
                          f"bool, got {type(v).__name__}")
    return v


def _is_strided(v, dev) -> bool:
    """Does array argument `v` need a strided parameter (layout 'A')?  The same tests as the
    contiguous checker's (`arg_checks._array_checker`), which raises `_Strided` exactly then."""
    if isinstance(v, np.ndarray):
        return not v.flags.c_contiguous
    if isinstance(v, DeviceArray):
        return False
    cai = getattr(v, "__cuda_array_interface__", None)
    if cai is not None:
        return _cai_strided(cai)
    if hasattr(v, "__dlpack__"):
        from . import dlpack
        try:
            d = dlpack.device_of(v)
            t = dlpack.import_object(v, stream=-1 if d and d[0] in _DL_GPU else None)
        except Exception:  # noqa: BLE001 - the checker reports the producer's failure
            return False
        try:
            return not t.is_c_contiguous()
        finally:
            t.release()
    return False


def _infer_type(name, v):
    """The pyptx type of an argument for an unannotated parameter (docs/launching.md): a
    non-contiguous array gets layout 'A' (the strided specialisation)."""
    if isinstance(v, np.ndarray):
        return T.ArrayType(_scalar_of(name, v.dtype), v.ndim,
                           "C" if v.flags.c_contiguous else "A")
    if isinstance(v, DeviceArray):
        return T.ArrayType(_scalar_of(name, v.dtype), v.ndim)
    if isinstance(v, np.generic):
        return _scalar_of(name, v.dtype)
    if type(v).__name__ == "TensorMap":
        from .tensormap import TensorMap
        if isinstance(v, TensorMap):
            return T.tensormap
    if isinstance(v, (bool, int, float)):
        if isinstance(v, int) and not isinstance(v, bool) and not -2**63 <= v < 2**63:
            raise LaunchError(f"argument '{name}': {v} does not fit in 64 bits")
        return T.literal_type(v)
    cai = getattr(v, "__cuda_array_interface__", None)
    if cai is not None:
        return T.ArrayType(_scalar_of(name, np.dtype(cai["typestr"])), len(cai["shape"]),
                           "A" if _cai_strided(cai) else "C")
    if hasattr(v, "__dlpack__"):
        from . import dlpack
        try:
            dev = dlpack.device_of(v)
            t = dlpack.import_object(v, stream=-1 if dev and dev[0] in _DL_GPU else None)
        except Exception as e:  # noqa: BLE001 - the producer refused
            raise LaunchError(f"argument '{name}': __dlpack__ failed: {e}") from None
        try:
            if t.dtype is None:
                raise LaunchError(f"argument '{name}': arrays of {t.describe_dtype()} are not "
                                  f"supported (use bool, int8..int64, uint8..uint64, "
                                  f"float16/32/64)")
            return T.ArrayType(_scalar_of(name, t.dtype), t.ndim,
                               "C" if t.is_c_contiguous() else "A")
        finally:
            t.release()
    raise LaunchError(f"argument '{name}' has no type annotation and pyptx cannot infer one "
                      f"from a {type(v).__name__}: pass a numpy array, DeviceArray or scalar, "
                      f"or annotate the parameter")


def _scalar_of(name, dtype):
    try:
        return T.from_dtype(dtype)
    except (KeyError, TypeError):
        raise LaunchError(f"argument '{name}': arrays of {dtype} are not supported (use "
                          f"bool, int8..int64, uint8..uint64, float16/32/64)") from None
