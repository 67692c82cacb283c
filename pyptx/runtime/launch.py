"""`k[grid, block](*args)`: bind, check and flatten the arguments, then run on the GPU or the CPU
executor (docs/launching.md).  Everything a launch can get wrong is raised here as `LaunchError`, before
anything runs, on both devices alike.

Speed: all per-kernel work (resolving parameter types, compiling, building one checker per
argument) happens once per distinct launch *signature* and is kept in a `_Plan`; a repeated
launch costs a dict lookup plus one small checker call per argument.
"""
from __future__ import annotations

import inspect
import math
import operator
import os
import threading

import numpy as np

from .. import types as T
from ..target import runs_on
from ..errors import CompileError, DeviceError, LaunchError
from . import checking, profile
from .envvars import env_reader
from .device_array import DeviceArray
from . import driver as _driver
from .driver import current_ordinal, stream_handle

_MAX_BLOCK = (1024, 1024, 64)
_MAX_GRID = (2**31 - 1, 65535, 65535)
_MAX_THREADS = 1024
_SHAPE_LIMIT = 2**31

# ---- device choice ----------------------------------------------------------------------------

_device_cache: dict = {}      # PYPTX_DEVICE value -> ('gpu' | 'cpu', reason the CPU is used)
_launch_state = threading.local()   # .stream: the `stream=` of the GPU launch being checked
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


def _capturing():
    if not _graph_hook:
        from .graph import capturing
        _graph_hook.append(capturing)
    return _graph_hook[0]()


_graph_hook: list = []


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


def _cpu_array_arg():
    from . import cpu
    return cpu.ArrayArg


# ---- binding arguments to parameters ----------------------------------------------------------

class _Strided(Exception):
    """Internal: a contiguous array parameter's checker met a non-contiguous argument; the
    launch takes the kernel's strided plan instead (`_Binder.plan(..., strided=True)`).
    args: (the checker's fail function, what to say if no strided plan takes it)."""


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
        arch = profile.current_arch() if dev == "gpu" else None    # the current device's
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
                if want is None or not (dev != "gpu" or arch == want.rstrip("a")):
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
    contiguous checker's (`_array_checker`), which raises `_Strided` exactly then."""
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


def _cai_strided(cai) -> bool:
    strides = cai.get("strides")
    if strides is None:
        return False
    shape = tuple(int(s) for s in cai["shape"])
    return tuple(strides) != _c_strides(shape, np.dtype(cai["typestr"]).itemsize)


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


# ---- the plan: one checker per argument --------------------------------------------------------

class _Plan:
    """Everything a launch of one CompiledKernel on one device (the CPU executor or one GPU:
    `ordinal`) needs, built once."""

    def __init__(self, ck, dev, positions, names, kname):
        sig = list(ck.signature)
        user = [names[i] for i in positions]
        if [a.name for a in sig] != user:
            raise LaunchError(f"internal: {kname} compiled with parameters "
                              f"{[a.name for a in sig]} but launched with {user}")
        array_arg = _cpu_array_arg() if dev == "cpu" else _gpu_array_arg()
        self.ck = ck
        self.launcher = None
        self.ordinal = None if dev == "cpu" else current_ordinal()
        self.checkers = [(pos, _checker(spec, dev, array_arg, kname, self.ordinal))
                         for pos, spec in zip(positions, sig)]
        flat_len = sum(1 + a.ndim * (2 if a.strided else 1) if a.kind == "array" else 1
                       for a in sig)
        if flat_len != len(ck.params):
            raise LaunchError(f"internal: {kname} has {len(ck.params)} PTX parameters but its "
                              f"signature flattens to {flat_len}")
        from .gpu import static_shared_bytes
        self.static_shared = static_shared_bytes(ck.ptx)
        if dev == "gpu":
            self.shared_limit = profile.gpu_profile().max_shared_per_block_optin
        else:
            self.shared_limit = profile.CPU_MAX_SHARED

    def gpu_launcher(self):
        """The GPU path's prepared launcher for this plan's kernel in its device's context,
        kept on the plan (plans are dropped when the driver is reset)."""
        from . import driver
        from .gpu import launcher_for
        self.launcher = launcher_for(self.ck, driver.context(self.ordinal))
        return self.launcher


def _gpu_array_arg():
    from .gpu import bind_array
    return bind_array


def _checker(spec, dev, array_arg, kname, ordinal=None):
    if spec.kind == "tensormap":
        return _tensormap_checker(spec.name, dev, kname, spec.writable)
    if spec.kind == "array":
        return _array_checker(spec, dev, array_arg, kname, ordinal)
    t = spec.dtype
    if t.is_bool:
        return _bool_checker(spec.name, kname)
    if t.is_int:
        return _int_checker(spec.name, t, kname)
    return _float_checker(spec.name, t, kname)


def _tensormap_checker(name, dev, kname, writable=False):
    """A `pyptx.tensormap` parameter: a TensorMap, flattened to itself on the CPU (the
    executor's launcher encodes it once its array has a heap address) and to the driver's 128
    bytes on a GPU."""
    from .tensormap import BoundTensorMap, TensorMap

    def check(a, out):
        if not isinstance(a, TensorMap):
            raise LaunchError(f"{kname}(): argument '{name}' must be a pyptx.TensorMap (the "
                              f"parameter is a pyptx.tensormap), got {type(a).__name__} "
                              f"{_short(a)}")
        if isinstance(a.array, DeviceArray) and a.array._freed:
            raise LaunchError(f"{kname}(): argument '{name}' is a TensorMap of a DeviceArray "
                              f"that was freed")
        if dev == "cpu":
            if isinstance(a.array, DeviceArray) and a.array._host is None:
                raise LaunchError(f"{kname}(): argument '{name}' is a TensorMap of a GPU "
                                  f"DeviceArray, but the launch runs on the CPU executor; make "
                                  f"it of a numpy array")
            if writable and not a.host_array().flags.writeable:
                raise LaunchError(f"{kname}(): argument '{name}' is a TensorMap of a read-only "
                                  f"array, but the kernel stores through it (tma_store)")
            out.append(BoundTensorMap(a, writable))
            return
        if not isinstance(a.array, DeviceArray) or a.array._host is not None:
            raise LaunchError(f"{kname}(): argument '{name}' is a TensorMap of a numpy array, "
                              f"but the launch runs on a GPU; make it of a DeviceArray: "
                              f"pyptx.TensorMap(pyptx.to_device(x), box)")
        out.append(a.gpu_bytes())
    return check


def _bfloat16_dtype():
    """numpy's dtype of `ml_dtypes.bfloat16` (a runtime dependency; uint16 if it is absent)."""
    from ..bfloat16 import BFLOAT16
    return BFLOAT16


def _describe_array(dtype, ndim) -> str:
    return f"{np.dtype(dtype).name} array with {ndim} dimension{'s' if ndim != 1 else ''}"


def _array_failures(spec, kname, ordinal):
    """(the other dtype accepted, fail(got), wrong_device(other, what=None)) of an array
    parameter's checker: the LaunchErrors naming the argument.  A bf16[...] parameter takes
    ml_dtypes.bfloat16 arrays as well as uint16 bit patterns (`alt`)."""
    name, dt, nd = spec.name, spec.dtype.dtype, spec.ndim
    alt = _bfloat16_dtype() if spec.dtype is T.bf16 else dt
    expected = _describe_array(dt, nd)
    if alt is not dt:
        expected = f"bfloat16 or {expected}"
    where = f" (launching {kname})"

    def fail(got):
        raise LaunchError(f"argument '{name}': expected {expected}, got {got}{where}")

    def wrong_device(other, what=None):
        what = what or f"is in the memory of CUDA device {other}"
        raise LaunchError(f"argument '{name}' {what}, but this launch runs on CUDA device "
                          f"{ordinal} (the calling thread's device, pyptx.use_device); launch "
                          f"it inside `with pyptx.use_device({other}):` or copy the array to "
                          f"device {ordinal} first{where}")
    return alt, fail, wrong_device


def _check_device_array(a, dt, alt, nd, dev, ordinal, fail, wrong_device) -> None:
    """What every array checker requires of a DeviceArray argument (past the fast path): its
    dtype and rank, not freed, memory of the launch's kind (GPU / CPU executor) and device."""
    if (a.dtype != dt and a.dtype != alt) or a.ndim != nd:
        fail(f"a DeviceArray of {_describe_array(a.dtype, a.ndim)}")
    if a._freed:
        fail("a DeviceArray that was freed (DeviceArray.free())")
    if dev == "cpu":
        if a.on_gpu:
            fail("a DeviceArray in GPU memory, but launches run on the CPU executor")
    elif not a.on_gpu:
        fail("a DeviceArray made for the CPU executor, but launches run on the GPU")
    elif a._device != ordinal:
        wrong_device(a._device)


def _cai_shape(cai, dt, alt, nd, dev, fail) -> tuple:
    """A `__cuda_array_interface__` argument's shape, after the checks every array checker
    makes of one: GPU launches only, the parameter's dtype and rank."""
    if dev == "cpu":
        fail("a GPU array (__cuda_array_interface__), but launches run on the CPU "
             "executor; copy it to a numpy array")
    shape = tuple(int(s) for s in cai["shape"])
    got_dt = np.dtype(cai["typestr"])
    if (got_dt != dt and got_dt != alt) or len(shape) != nd:
        fail(f"a GPU array of {_describe_array(got_dt, len(shape))}")
    return shape


def _array_checker(spec, dev, array_arg, kname, ordinal=None):
    if spec.strided:
        return _strided_checker(spec, dev, array_arg, kname, ordinal)
    dt, nd, writable = spec.dtype.dtype, spec.ndim, spec.writable
    alt, fail, wrong_device = _array_failures(spec, kname, ordinal)
    gpu = dev == "gpu"

    def check(a, out):
        if gpu and type(a) is DeviceArray and a._host is None:    # the fast, common case
            shape = a.shape
            if (a.dtype is not dt and a.dtype != dt and a.dtype != alt) or len(shape) != nd:
                fail(f"a DeviceArray of {_describe_array(a.dtype, len(shape))}")
            if a._freed:
                fail("a DeviceArray that was freed (DeviceArray.free())")
            if a._device != ordinal:
                wrong_device(a._device)
            for s in shape:
                if s >= _SHAPE_LIMIT:
                    fail(f"shape {shape}: every dimension must be below 2**31")
            out.append(a._ptr)             # the address itself: nothing to stage
            out.extend(shape)
            return
        if isinstance(a, np.ndarray):
            if (a.dtype != dt and a.dtype != alt) or a.ndim != nd:
                fail(_describe_array(a.dtype, a.ndim))
            flags = a.flags
            if not flags.c_contiguous:
                raise _Strided(fail, "a non-contiguous array (pass np.ascontiguousarray(...))")
            if writable and not flags.writeable:
                fail("a read-only array, but the kernel writes to it")
            shape = a.shape
        elif isinstance(a, DeviceArray):
            _check_device_array(a, dt, alt, nd, dev, ordinal, fail, wrong_device)
            shape = a.shape
            if dev == "cpu":
                a = a._host
            else:
                for s in shape:
                    if s >= _SHAPE_LIMIT:
                        fail(f"shape {shape}: every dimension must be below 2**31")
                out.append(a._ptr)             # GPU: the address itself, nothing to stage
                out.extend(shape)
                return
        else:
            cai = getattr(a, "__cuda_array_interface__", None)
            if cai is None:
                if not hasattr(a, "__dlpack__"):
                    fail(f"{type(a).__name__} {_short(a)}")
                if _capturing() is not None:   # before __dlpack__ consumes (and syncs) it
                    fail("a DLPack-only object inside a pyptx.graph() capture: exporting it "
                         "would synchronise, and a graph replays without it; pass a "
                         "DeviceArray or an object with __cuda_array_interface__")
                a, shape = _dlpack_arg(a, dev, (dt, alt), nd, writable, fail, wrong_device)
                for s in shape:
                    if s >= _SHAPE_LIMIT:
                        fail(f"shape {shape}: every dimension must be below 2**31")
                out.append(array_arg(a, writable))
                out.extend(shape)
                return
            shape = _cai_shape(cai, dt, alt, nd, dev, fail)
            if _cai_strided(cai):
                raise _Strided(fail, "a non-contiguous GPU array")
            if cai.get("stream", None) == 0:
                fail("a __cuda_array_interface__ with stream 0, which the interface (v3) "
                     "forbids: the producer must give 1, 2 or a stream handle")
            _check_gpu_pointer(int(cai["data"][0]), fail, wrong_device, ordinal)
        for s in shape:
            if s >= _SHAPE_LIMIT:
                fail(f"shape {shape}: every dimension must be below 2**31")
        out.append(array_arg(a, writable))
        out.extend(shape)
    return check


def _c_elem_strides(shape) -> list:
    """Element strides of a C-contiguous array of `shape`."""
    out, step = [], 1
    for s in reversed(shape):
        out.append(step)
        step *= s
    return out[::-1]


def _strided_checker(spec, dev, array_arg, kname, ordinal=None):
    """The checker of a strided array parameter (layout 'A'): any layout is taken, and the
    flat arguments are the pointer (of the element at index 0, wherever the strides go from
    there), one i32 size and then one i64 stride *in elements* per dimension.

    CPU: a numpy array is passed as it is (the executor maps the bytes its elements span).
    GPU: a non-contiguous numpy array is staged as a contiguous copy (the strides passed are
    the copy's, and a written one is copied back into the caller's view); DeviceArrays are
    contiguous; `__cuda_array_interface__` (strides in bytes) and DLPack (in elements) device
    arrays are used in place with their own strides.  A stride of 0 (np.broadcast_to) may be
    read, not written: the writes of its elements would race on one location."""
    dt, nd, writable = spec.dtype.dtype, spec.ndim, spec.writable
    alt, fail, wrong_device = _array_failures(spec, kname, ordinal)
    gpu = dev == "gpu"
    itemsize = dt.itemsize

    def elements(byte_strides, shape):
        out = []
        for s in byte_strides:
            s = int(s)
            if s % itemsize:
                fail(f"an array with strides {tuple(byte_strides)} (bytes) that are not "
                     f"multiples of its {itemsize}-byte elements; pass a copy "
                     f"(np.ascontiguousarray(...))")
            out.append(s // itemsize)
        return out

    def validate(shape, strides):
        for s in shape:
            if s >= _SHAPE_LIMIT:
                fail(f"shape {shape}: every dimension must be below 2**31")
        if writable:
            for d, (s, n) in enumerate(zip(strides, shape)):
                if s == 0 and n > 1:
                    fail(f"a broadcast array (stride 0 along dimension {d}: its {n} elements "
                         f"are one memory location), but the kernel writes to it, and those "
                         f"writes would race; pass a writable copy (np.array(...))")

    def finish(ptr, shape, strides, out):
        out.append(ptr)
        out.extend(shape)
        out.extend(strides)

    def check(a, out):
        if isinstance(a, np.ndarray):
            if (a.dtype != dt and a.dtype != alt) or a.ndim != nd:
                fail(_describe_array(a.dtype, a.ndim))
            shape = a.shape
            if a.flags.c_contiguous:
                strides = _c_elem_strides(shape)
            else:
                strides = elements(a.strides, shape)
                validate(shape, strides)
            if writable and not a.flags.writeable:
                fail("a read-only array, but the kernel writes to it")
            if gpu and not a.flags.c_contiguous:
                # staged as a contiguous copy: the kernel gets the copy's strides
                from .gpu import StagedCopy
                finish(StagedCopy(a, writable), shape, _c_elem_strides(shape), out)
                return
            validate(shape, ())
            finish(array_arg(a, writable), shape, strides, out)
            return
        if isinstance(a, DeviceArray):
            _check_device_array(a, dt, alt, nd, dev, ordinal, fail, wrong_device)
            shape = a.shape
            if dev == "cpu":
                validate(shape, ())
                finish(array_arg(a._host, writable), shape, _c_elem_strides(shape), out)
                return
            validate(shape, ())
            finish(a._ptr, shape, _c_elem_strides(shape), out)
            return
        cai = getattr(a, "__cuda_array_interface__", None)
        if cai is None:
            if not hasattr(a, "__dlpack__"):
                fail(f"{type(a).__name__} {_short(a)}")
            if _capturing() is not None:
                fail("a DLPack-only object inside a pyptx.graph() capture: exporting it "
                     "would synchronise, and a graph replays without it; pass a "
                     "DeviceArray or an object with __cuda_array_interface__")
            t, shape = _dlpack_arg(a, dev, (dt, alt), nd, writable, fail, wrong_device,
                                   strided=True)
            try:
                if dev == "cpu":        # a numpy view of the producer's memory
                    strides = elements(t.strides, shape)
                else:                   # DLPack strides count elements already
                    strides = list(t.strides) if t.strides is not None else \
                        _c_elem_strides(shape)
                validate(shape, strides)
                finish(array_arg(t, writable), shape, strides, out)
            except BaseException:
                if dev != "cpu":
                    t.release()
                raise
            return
        shape = _cai_shape(cai, dt, alt, nd, dev, fail)
        byte_strides = cai.get("strides")
        strides = _c_elem_strides(shape) if byte_strides is None else \
            elements(byte_strides, shape)          # the interface's strides are bytes
        if cai.get("stream", None) == 0:
            fail("a __cuda_array_interface__ with stream 0, which the interface (v3) "
                 "forbids: the producer must give 1, 2 or a stream handle")
        validate(shape, strides)
        _check_gpu_pointer(int(cai["data"][0]), fail, wrong_device, ordinal)
        finish(array_arg(a, writable), shape, strides, out)
    return check


_DL_GPU = (2, 13)            # kDLCUDA, kDLCUDAManaged: memory a kernel can use by address
_DL_HOST = (1, 3, 13)        # kDLCPU, kDLCUDAHost (pinned), kDLCUDAManaged: host-addressable


def _dlpack_stream():
    """The DLPack `stream` value for the current GPU launch's stream (1 = legacy default)."""
    from . import driver
    h = driver.stream_handle(getattr(_launch_state, "stream", None))
    if h is None:
        return 1
    try:
        h = int(h)
    except (TypeError, ValueError):
        return None
    return h or 1


def _dlpack_arg(a, dev, dts, nd, writable, fail, wrong_device=None, strided=False):
    """Consume `a.__dlpack__()` for an array parameter (of one of the dtypes `dts`): (what the
    device launch takes, shape).

    GPU: an ImportedTensor whose `.data` the kernel gets (released by the GPU launcher once
    the kernel has finished).  CPU: a
    numpy view of the producer's memory (the deleter runs when the view is dropped)."""
    from . import dlpack
    try:
        dl_dev = dlpack.device_of(a)
    except Exception as e:  # noqa: BLE001
        fail(f"a DLPack object whose __dlpack_device__() failed ({e})")
    if dl_dev is not None:
        _dlpack_device_check(dl_dev, dev, fail, wrong_device)
    try:
        t = dlpack.import_object(a, stream=_dlpack_stream() if dev == "gpu" else None)
    except Exception as e:  # noqa: BLE001 - BufferError, TypeError, ... from the producer
        fail(f"a DLPack object whose __dlpack__() failed ({type(e).__name__}: {e})")
    try:
        _dlpack_device_check(t.device, dev, fail, wrong_device)
        if t.dtype is None or not any(t.dtype == d for d in dts) or t.ndim != nd:
            fail(f"a DLPack tensor of {t.describe_dtype()} with {t.ndim} "
                 f"dimension{'s' if t.ndim != 1 else ''}")
        if not strided and not t.is_c_contiguous():
            raise _Strided(fail, "a non-contiguous DLPack tensor")
        if writable and t.read_only:
            fail("a read-only DLPack tensor, but the kernel writes to it")
        if dev == "cpu":
            return t.as_numpy(), t.shape
        return t, t.shape
    except BaseException:
        t.release()
        raise


def _dlpack_device_check(dl_dev, dev, fail, wrong_device=None):
    from . import dlpack
    if dev == "cpu":
        if dl_dev[0] not in _DL_HOST:
            fail(f"a DLPack tensor on {dlpack.device_name(dl_dev)}, but launches run on the "
                 f"CPU executor; copy it to host memory first (e.g. np.asarray(x.cpu()) or "
                 f"x.get()), or run on a GPU (PYPTX_DEVICE=gpu)")
        return
    if dl_dev[0] not in _DL_GPU:
        fail(f"a DLPack tensor on {dlpack.device_name(dl_dev)}, but launches run on the GPU; "
             f"move it to the GPU (pyptx.to_device(np.from_dlpack(x)), x.cuda(), ...) or pass "
             f"a numpy array (np.from_dlpack(x)) to have it copied in and out")
    ordinal = current_ordinal()
    if dl_dev[1] != ordinal:
        if wrong_device is not None:
            wrong_device(dl_dev[1], f"is a DLPack tensor on {dlpack.device_name(dl_dev)} "
                                    f"(CUDA device {dl_dev[1]})")
        fail(f"a DLPack tensor on {dlpack.device_name(dl_dev)}, but pyptx launches on CUDA "
             f"device {ordinal}")


def _check_gpu_pointer(ptr: int, fail, wrong_device=None, ordinal=None) -> None:
    """A foreign device pointer must be memory of the device this launch runs on.

    The owner is the pointer's context (CU_POINTER_ATTRIBUTE_CONTEXT: one of pyptx's primary
    contexts, or another one whose device the driver tells), because some cuda-bindings
    releases report CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL as 0 for every pointer; the ordinal
    attribute decides only when the memory has no context (stream-ordered pools, VMM)."""
    if not ptr:
        return
    from . import driver
    ctx = driver.context(ordinal)
    drv = ctx.drv
    attrs = drv.CUpointer_attribute
    res = drv.cuPointerGetAttribute(attrs.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    if res[0] != ctx.success:
        fail(f"a GPU array whose address {ptr:#x} the CUDA driver does not know as device "
             f"memory ({driver.error_name(drv, res[0])})")
    owner = int(res[1])
    cres = drv.cuPointerGetAttribute(attrs.CU_POINTER_ATTRIBUTE_CONTEXT, ptr)
    handle = int(cres[1] or 0) if cres[0] == ctx.success else 0
    if handle:
        if handle == ctx.handle_int:
            return                              # memory of this very context
        of_ctx = driver.ordinal_of_context(cres[1])
        if of_ctx is not None:
            owner = of_ctx
            if owner == ctx.ordinal:
                fail(f"memory of another CUDA context on device {owner} (context "
                     f"{handle:#x}, not the primary context pyptx launches in), which kernels "
                     f"of this context cannot address; allocate it in the device's primary "
                     f"context")
    if owner != ctx.ordinal:
        if wrong_device is not None:
            wrong_device(owner)
        fail(f"an array in the memory of CUDA device {owner}, but pyptx launches on "
             f"device {ctx.ordinal}; copy it to device {ctx.ordinal} first")


def _c_strides(shape, itemsize) -> tuple:
    strides, step = [], itemsize
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return tuple(reversed(strides))


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _int_checker(name, t, kname):
    info = np.iinfo(t.dtype)
    lo, hi = int(info.min), int(info.max)
    tname = t.dtype.name

    def check(v, out):
        if type(v) is not int:
            if isinstance(v, (int, np.integer)):       # bool, numpy ints
                v = int(v)
            elif isinstance(v, (float, np.floating)):
                raise LaunchError(f"argument '{name}': expected an integer ({tname}), got "
                                  f"float {v!r}; convert it with int() (launching {kname})")
            else:
                raise LaunchError(f"argument '{name}': expected an integer ({tname}), got "
                                  f"{type(v).__name__} {_short(v)} (launching {kname})")
        if v < lo or v > hi:
            raise LaunchError(f"argument '{name}': {v} is out of range for {tname} "
                              f"[{lo}, {hi}] (launching {kname})")
        out.append(v)
    return check


#: smallest magnitude that rounds to infinity in each float type (round-to-nearest-even)
_FLOAT_OVERFLOW = {"f16": 65520.0, "f32": 2.0**128 - 2.0**103, "f64": math.inf,
                   "bf16": 2.0**128 - 2.0**119}


def _float_checker(name, t, kname):
    lim = _FLOAT_OVERFLOW[t.name]
    tname = t.dtype.name
    bits = None
    if t.name == "bf16":            # passed as its bit pattern (the host form of bf16)
        bits, tname = t, "bf16"

    def check(v, out):
        if type(v) is not float:
            if isinstance(v, (bool, np.bool_)) or not isinstance(
                    v, (int, float, np.integer, np.floating)):
                raise LaunchError(f"argument '{name}': expected a number ({tname}), got "
                                  f"{type(v).__name__} {_short(v)} (launching {kname})")
            try:
                v = float(v)
            except OverflowError:
                raise LaunchError(f"argument '{name}': {v} is out of range for {tname} "
                                  f"(launching {kname})") from None
        if (v >= lim or v <= -lim) and not math.isinf(v):
            raise LaunchError(f"argument '{name}': {v!r} is out of range for {tname} "
                              f"(launching {kname})")
        # f16/f32/f64: packed straight from the Python float (struct rounds like numpy)
        out.append(v if bits is None else bits(v))
    return check


def _bool_checker(name, kname):
    def check(v, out):
        if v is True or v is False:
            out.append(v)
        elif isinstance(v, np.bool_):
            out.append(bool(v))
        else:
            raise LaunchError(f"argument '{name}': expected a bool, got {type(v).__name__} "
                              f"{_short(v)} (launching {kname})")
    return check

