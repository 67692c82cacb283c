"""Graphs by CUDA's capture rules, everywhere.

Three layers, one rule table (pyptx/runtime/capture_rules.py):
* pyptx's own check: inside `with pyptx.graph()` an allocation, free, synchronous copy or
  synchronisation is a LaunchError naming the pyptx call and the driver call — on the CPU
  executor and on the GPU path alike, raised before anything reaches the driver;
* the fake driver (tests/fake_graph.py) refuses what the real one refuses, with the documented
  CUresult, and invalidates the capture — so if pyptx itself broke a rule, the GPU tests fail;
* graph lifetime: recorded arrays kept alive, freed ones refused at g.launch(), g.launch's
  stream= validated, the block's own exception propagating unchanged."""
from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import pyptx
from pyptx import cuda, f32, i32
from pyptx.runtime import capture_rules as CR
from pyptx.runtime import driver, streams

from fake_driver import hand_compiled, idle_in_pool, on_fake_gpu
from fake_graph import GraphFakeDriver
from test_driver_fake import SCALE, scale, scale_body, use_compiled

R = GraphFakeDriver.CUresult
MODE = GraphFakeDriver.CUstreamCaptureMode


@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, GraphFakeDriver())


@pyptx.kernel
def twice(out: f32[:], x: f32[:], n: i32):
    i = pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x
    if i < n:
        out[i] = 2.0 * x[i]


# ---- pyptx's rule: the same LaunchError on both devices -------------------------------------------

def _violations(device_array_of):
    """(pyptx call in words, driver call it needs, the action) for every forbidden user call."""
    a = device_array_of(np.arange(8, dtype=np.float32))
    host = np.zeros(8, np.float32)
    return [
        ("pyptx.to_device()", "cuMemAlloc", lambda: pyptx.to_device(host)),
        ("cuda.device_array()", "cuMemAlloc", lambda: cuda.device_array(8, np.float32)),
        ("cuda.to_device", "cuMemAlloc", lambda: cuda.to_device(host)),
        ("DeviceArray.copy_to_host()", "cuMemcpyDtoH", lambda: a.copy_to_host()),
        ("DeviceArray.copy_from_host()", "cuMemcpyHtoD", lambda: a.copy_from_host(host)),
        ("DeviceArray.free()", "cuMemFree", lambda: a.free()),
        ("DeviceArray.__dlpack__()", "cuCtxSynchronize", lambda: a.__dlpack__()),
    ]


@pytest.mark.parametrize("i", range(7))
def test_forbidden_calls_inside_a_graph_on_the_cpu_executor(cpu, i):
    api, call, act = _violations(pyptx.to_device)[i]
    with pytest.raises(pyptx.LaunchError) as ei:
        with pyptx.graph():
            act()
    msg = str(ei.value)
    assert call in msg and "inside a pyptx.graph() capture" in msg
    assert api.split("(")[0].replace("cuda.", "") in msg.replace("cuda.", "")
    assert CR.RULES[call].instead in msg


@pytest.mark.parametrize("i", range(7))
def test_forbidden_calls_inside_a_graph_on_the_gpu_never_reach_the_driver(fake, i):
    api, call, act = _violations(pyptx.to_device)[i]
    mark = len(fake.calls)
    with pytest.raises(pyptx.LaunchError, match=call):
        with pyptx.graph():
            act()
    names = [c[0] for c in fake.calls[mark:]]
    assert call not in names and fake.violations == []
    assert "cuStreamEndCapture" in names and fake.capturing == {}


def test_forbidden_stream_and_event_synchronisation_on_the_gpu(fake):
    s, e = streams.Stream(), streams.Event()
    e.record()
    for act, call in ((s.synchronize, "cuStreamSynchronize"), (e.synchronize,
                      "cuEventSynchronize"), (lambda: e.elapsed_ms(e), "cuEventElapsedTime"),
                      (streams.synchronize, "cuCtxSynchronize")):
        with pytest.raises(pyptx.LaunchError, match=call):
            with pyptx.graph():
                act()
    assert fake.violations == []


def test_the_same_calls_are_fine_outside_a_graph(cpu):
    for _api, _call, act in _violations(pyptx.to_device):
        act()


# ---- the fake driver follows the driver's documented rules -----------------------------------------

def _capture(fake, mode="CU_STREAM_CAPTURE_MODE_THREAD_LOCAL", non_blocking=True):
    ctx = driver.context()
    s = streams.Stream(non_blocking=non_blocking)
    ctx.call("cuStreamBeginCapture", fake.cuStreamBeginCapture, s.handle, getattr(MODE, mode))
    return ctx, s


def _end(fake, s):
    return fake.cuStreamEndCapture(s.handle)[0]


def test_fake_unsafe_call_in_a_thread_local_capture_fails_and_invalidates(fake):
    ctx, s = _capture(fake)
    res = fake.cuMemAlloc(64)
    assert res[0] == R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and res[1] is None
    assert _end(fake, s) == R.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED


def test_fake_relaxed_thread_mode_allows_unsafe_calls(fake):
    ctx, s = _capture(fake)
    prev = streams.exchange_capture_mode("CU_STREAM_CAPTURE_MODE_RELAXED")
    assert fake.cuMemAlloc(64)[0] == R.CUDA_SUCCESS
    streams.exchange_capture_mode(prev)
    assert fake.cuMemAlloc(64)[0] == R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
    assert prev == MODE.CU_STREAM_CAPTURE_MODE_GLOBAL


def test_fake_relaxed_capture_allows_unsafe_calls(fake):
    ctx, s = _capture(fake, "CU_STREAM_CAPTURE_MODE_RELAXED")
    assert fake.cuMemAlloc(64)[0] == R.CUDA_SUCCESS
    assert _end(fake, s) == R.CUDA_SUCCESS


def test_fake_global_capture_in_another_thread_blocks_this_thread(fake):
    """GLOBAL mode: another thread's GLOBAL capture prohibits this thread's unsafe calls;
    a THREAD_LOCAL capture elsewhere does not."""
    for mode, blocked in (("CU_STREAM_CAPTURE_MODE_GLOBAL", True),
                          ("CU_STREAM_CAPTURE_MODE_THREAD_LOCAL", False)):
        ctx, s = _capture(fake, mode)
        got = []
        t = threading.Thread(target=lambda: (ctx.enter(), got.append(fake.cuMemAlloc(64)[0])))
        t.start()
        t.join()
        assert (got[0] == R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) == blocked
        _end(fake, s)


def test_fake_legacy_stream_work_meets_only_blocking_capture_streams(fake):
    driver.context()
    dev = int(fake.cuMemAlloc(64)[1])
    host = np.zeros(16, np.float32)
    ctx, s = _capture(fake, "CU_STREAM_CAPTURE_MODE_RELAXED", non_blocking=False)
    assert fake.cuMemcpyHtoD(dev, host.ctypes.data, 64)[0] == R.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
    assert _end(fake, s) == R.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
    ctx, s = _capture(fake, "CU_STREAM_CAPTURE_MODE_RELAXED", non_blocking=True)
    assert fake.cuMemcpyHtoD(dev, host.ctypes.data, 64)[0] == R.CUDA_SUCCESS
    assert _end(fake, s) == R.CUDA_SUCCESS


def test_fake_synchronising_the_capturing_stream_or_context_fails(fake):
    for call in (lambda s: fake.cuStreamSynchronize(s.handle),
                 lambda s: fake.cuStreamQuery(s.handle), lambda s: fake.cuCtxSynchronize()):
        ctx, s = _capture(fake, "CU_STREAM_CAPTURE_MODE_RELAXED")
        assert call(s)[0] == R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
        assert _end(fake, s) == R.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED


def test_fake_captured_events_cannot_be_queried_and_outside_events_not_waited_on(fake):
    ctx, s = _capture(fake, "CU_STREAM_CAPTURE_MODE_RELAXED")
    inside = fake.cuEventCreate(0)[1]
    fake.cuEventRecord(inside, s.handle)
    assert fake.cuEventQuery(inside)[0] == R.CUDA_ERROR_CAPTURED_EVENT
    assert fake.cuEventSynchronize(inside)[0] == R.CUDA_ERROR_CAPTURED_EVENT
    assert fake.cuStreamWaitEvent(s.handle, inside, 0)[0] == R.CUDA_SUCCESS   # same capture
    outside = fake.cuEventCreate(0)[1]
    other = streams.Stream()
    fake.cuEventRecord(outside, other.handle)
    assert fake.cuStreamWaitEvent(s.handle, outside, 1)[0] == R.CUDA_SUCCESS  # WAIT_EXTERNAL
    assert fake.cuStreamWaitEvent(s.handle, outside, 0)[0] == \
        R.CUDA_ERROR_STREAM_CAPTURE_ISOLATION
    assert _end(fake, s) == R.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED


def test_fake_end_capture_from_another_thread_is_wrong_thread(fake):
    ctx, s = _capture(fake)
    got = []
    t = threading.Thread(target=lambda: got.append(fake.cuStreamEndCapture(s.handle)[0]))
    t.start()
    t.join()
    assert got == [R.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD]
    assert _end(fake, s) == R.CUDA_SUCCESS


def test_rule_table_names_real_cuda_results_and_calls():
    import cuda.bindings.driver as real
    for kind, name in CR.RESULT.items():
        assert hasattr(real.CUresult, name), name
    for call in CR.RULES:
        assert hasattr(real, call), call
    assert {"cuMemAlloc", "cuMemFree", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuCtxSynchronize",
            "cuStreamSynchronize"} <= CR.FORBIDDEN_IN_GRAPH


# ---- what pyptx does inside a capture passes the fake's rules ----------------------------------------

def test_first_launch_inside_a_capture_loads_its_module_in_relaxed_mode(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.bodies["scale"] = scale_body
    x = pyptx.to_device(np.arange(8, dtype=np.float32))
    y = pyptx.to_device(np.zeros(8, np.float32))
    with pyptx.graph() as g:
        scale[1, 8](y, x, 3.0, 8)                     # first use: the module loads here
    assert fake.violations == []
    names = [c[0] for c in fake.calls]
    load = names.index("cuModuleLoadDataEx")
    assert names[load - 1] == "cuThreadExchangeStreamCaptureMode"
    assert "cuThreadExchangeStreamCaptureMode" in names[load + 1:]
    g.launch()
    np.testing.assert_array_equal(y.copy_to_host(), np.arange(8, dtype=np.float32) * 3)


def test_without_the_relaxed_exchange_the_fake_would_refuse_the_module_load(fake, monkeypatch):
    """The planted bug: load a module inside the capture without outside_capture()."""
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    import contextlib
    from pyptx.runtime import graph as G
    monkeypatch.setattr(G, "outside_capture", contextlib.nullcontext)
    x = pyptx.to_device(np.arange(8, dtype=np.float32))
    with pytest.raises(pyptx.DeviceError, match="CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"):
        with pyptx.graph():
            scale[1, 8](x, x, 3.0, 8)


def test_garbage_collected_arrays_are_freed_after_the_capture(fake):
    a = pyptx.to_device(np.ones(8, np.float32))
    ptr = a.device_pointer
    with pyptx.graph():
        del a
        gc.collect()
        assert not idle_in_pool(ptr)                  # not released inside the capture
    assert idle_in_pool(ptr) and fake.violations == []


def test_the_block_exception_propagates_even_when_the_capture_was_invalidated(fake):
    with pytest.raises(ZeroDivisionError):
        with pyptx.graph() as g:
            fake.cuMemAlloc(16)                       # invalidates the capture (not via pyptx)
            1 / 0
    assert fake.capturing == {}
    with pytest.raises(pyptx.LaunchError, match="discarded"):
        g.launch()


def test_an_invalidated_capture_without_exception_says_what_happened(fake):
    with pytest.raises(pyptx.DeviceError, match="STREAM_CAPTURE_INVALIDATED.*outside pyptx"):
        with pyptx.graph():
            fake.cuMemAlloc(16)


def test_profile_around_a_gpu_graph_times_the_replay_not_the_capture(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.bodies["scale"] = scale_body
    x = pyptx.to_device(np.arange(8, dtype=np.float32))
    scale[1, 8](x, x, 1.0, 8)
    with pyptx.profile() as prof:
        with pyptx.graph() as g:
            scale[1, 8](x, x, 1.0, 8)
            scale[1, 8](x, x, 1.0, 8)
        g.launch()
    assert fake.violations == []
    assert len(prof.launches) == 1 and "graph of 2 launches" in prof.launches[0].kernel


class _Producer:
    """A CAI array whose producer works on the legacy stream (CuPy's default), and a DLPack
    object that counts exports."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False),
                                         "strides": None, "version": 3, "stream": 1}


def test_foreign_arrays_inside_a_capture_wait_on_nothing_uncaptured(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.bodies["scale"] = scale_body
    driver.context().enter()
    px = int(fake.cuMemAlloc(32)[1])
    y = pyptx.to_device(np.zeros(8, np.float32))
    with pyptx.graph():
        scale[1, 8](y, _Producer(px, 8), 2.0, 8)
    assert fake.violations == []


class _DLPackOnly:
    def __init__(self):
        self.exports = 0

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, **kw):
        self.exports += 1
        raise BufferError("should not be exported inside a capture")


def test_dlpack_only_objects_are_refused_before_they_are_exported(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    y = pyptx.to_device(np.zeros(8, np.float32))
    obj = _DLPackOnly()
    with pytest.raises(pyptx.LaunchError, match="DLPack-only object inside a pyptx.graph"):
        with pyptx.graph():
            scale[1, 8](y, obj, 2.0, 8)
    assert obj.exports == 0


# ---- graph lifetime ----------------------------------------------------------------------------

def _twice_on(device, request, monkeypatch):
    """The fake GPU with `twice` hand-compiled (returned), or the CPU executor (None)."""
    if device == "cpu":
        request.getfixturevalue("cpu")
        return None
    f = request.getfixturevalue("fake")
    use_compiled(monkeypatch, hand_compiled("twice", [
        ("out", "array", f32, 1, True), ("x", "array", f32, 1, False),
        ("n", "scalar", i32, 0, False)]))
    return f


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_launch_after_a_recorded_array_was_freed_is_a_launch_error(device, request, monkeypatch):
    f = _twice_on(device, request, monkeypatch)
    x = pyptx.to_device(np.arange(8, dtype=np.float32))
    y = pyptx.to_device(np.zeros(16, np.float32))
    view = y[4:12]
    with pyptx.graph() as g:
        twice[1, 8](view, x, 8)
    g.launch()
    y.free()                                          # the view's owner
    with pytest.raises(pyptx.LaunchError, match="argument 'out' of its twice launch.*freed"):
        g.launch()
    if device == "gpu":
        assert f.violations == []


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("bad", ["not a stream", -1, 1.5, True])
def test_graph_launch_validates_stream_like_a_kernel_launch(device, bad, request, monkeypatch):
    _twice_on(device, request, monkeypatch)
    x = pyptx.to_device(np.arange(8, dtype=np.float32))
    with pyptx.graph() as g:
        twice[1, 8](x, x, 8)
    with pytest.raises(pyptx.LaunchError, match="stream"):
        g.launch(stream=bad)
    with pytest.raises(pyptx.LaunchError, match="stream"):
        twice[1, 8](x, x, 8, stream=bad)


def test_a_graph_keeps_its_arrays_until_replays_finish(fake, monkeypatch):
    """close() lets the recorded arrays go only after the work queued on each replay stream
    (stream-ordered), never relying on cuMemFree to synchronise."""
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.bodies["scale"] = scale_body
    x = pyptx.to_device(np.arange(8, dtype=np.float32))
    ptr = x.device_pointer
    with pyptx.graph() as g:
        scale[1, 8](x, x, 2.0, 8)
    del x
    gc.collect()
    assert not idle_in_pool(ptr)                     # the graph holds it
    g.launch()
    g.close()
    gc.collect()
    assert not idle_in_pool(ptr)                     # the replay has not run yet
    streams.synchronize()                              # the replay finishes; then released
    gc.collect()
    assert idle_in_pool(ptr)
    assert fake.violations == []


def test_real_bindings_accept_every_capture_call_pyptx_makes(fake, monkeypatch):
    """Without libcuda the real cuda.bindings (12.x or 13.x, whichever is installed) still
    convert every argument before looking for the library: replay the calls a capture, a
    replay and a close made on the fake against them."""
    from test_gpu_runtime import _real_library_loadable
    if _real_library_loadable():
        pytest.skip("replaying fake handles on a real driver is unsafe")
    import cuda.bindings.driver as real
    from cuda.pathfinder import DynamicLibNotFoundError
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.bodies["scale"] = scale_body
    x = pyptx.to_device(np.arange(8, dtype=np.float32))
    mark = len(fake.calls)
    with pyptx.graph() as g:
        scale[1, 8](x, x, 2.0, 8)                     # first use: relaxed exchange + load
        y = pyptx.runtime.device_array.result_empty((8,), np.float32)
    s = streams.Stream()
    g.launch(stream=s)
    g.close()
    streams.synchronize()
    del y
    calls = fake.calls[mark:]
    names = {n for n, _ in calls}
    assert {"cuStreamCreate", "cuStreamBeginCapture", "cuThreadExchangeStreamCaptureMode",
            "cuStreamEndCapture", "cuGraphInstantiate", "cuGraphLaunch", "cuGraphExecDestroy",
            "cuGraphDestroy", "cuMemAlloc"} <= names
    bad = []
    for name, args in calls:
        try:
            getattr(real, name)(*args)
        except DynamicLibNotFoundError:
            pass
        except Exception as err:  # noqa: BLE001
            bad.append(f"{name}{args!r}: {type(err).__name__}: {err}")
    assert not bad, "\n".join(bad)


# ---- a decode step captured on the fake GPU, under the rules, checked against the CPU --------------

def _decode_step_outputs(tokens=4):
    """rmsnorm → rope → paged_kv_scatter → paged_attention → add on DeviceArrays, captured once
    (first use inside the capture: modules load there) and replayed per token; the host writes
    input, position, slot and length between replays, as stdlib_kernels.llama's decode step does."""
    import stdlib_kernels as sk
    r = np.random.default_rng(5)
    ps, heads, hd, pages = 4, 2, 16, 3
    table = np.array([[2, 0, 1]], np.int32)
    w = r.standard_normal(heads * hd).astype(np.float32)
    kp = np.zeros((pages, heads, ps, hd), np.float32)
    x_d, w_d = pyptx.to_device(np.zeros((1, heads * hd), np.float32)), pyptx.to_device(w)
    pos_d, slot_d, len_d = (pyptx.to_device(np.zeros(1, np.int32)) for _ in range(3))
    kp_d, vp_d, bt_d = pyptx.to_device(kp), pyptx.to_device(kp), pyptx.to_device(table)
    with pyptx.graph() as g:
        q = sk.rope(sk.rmsnorm(x_d, w_d).reshape(1, heads, hd), pos_d, layout="gptj")
        sk.paged_kv_scatter(q, q, kp_d, vp_d, slot_d)
        att = sk.paged_attention(q, kp_d, vp_d, bt_d, len_d)
        out_d = sk.add(att.reshape(1, heads * hd), x_d)
    outs = []
    for t in range(tokens):
        x_d.copy_from_host(r.standard_normal((1, heads * hd)).astype(np.float32))
        pos_d.copy_from_host(np.array([t], np.int32))
        slot_d.copy_from_host(np.array([table[0, t // ps] * ps + t % ps], np.int32))
        len_d.copy_from_host(np.array([t + 1], np.int32))
        g.launch()
        outs.append(out_d.copy_to_host())
    return g, np.stack(outs)


def test_decode_step_captures_on_the_fake_gpu_and_matches_the_cpu_executor(fake, monkeypatch):
    g, on_gpu = _decode_step_outputs()
    assert g.launches == 5 and fake.violations == []
    assert any(c[0] == "cuThreadExchangeStreamCaptureMode" for c in fake.calls)
    assert np.isfinite(on_gpu).all()
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    _, on_cpu = _decode_step_outputs()
    np.testing.assert_array_equal(on_gpu, on_cpu)       # same PTX, same executor


# ---- every stdlib function that takes DeviceArrays captures cleanly ---------------------------------

def _stdlib_cases():
    import stdlib_kernels as sk
    from stdlib_kernels import quant
    r = np.random.default_rng(11)
    f = lambda *s: r.standard_normal(s).astype(np.float32)  # noqa: E731
    w4, w6, w8 = (quant.quantize(f(64, 256), t) for t in ("q4_k", "q6_k", "q8_0"))
    pages = f(3, 2, 4, 16)
    return {
        "softmax": (sk.softmax, (f(4, 100),)),
        "rmsnorm": (sk.rmsnorm, (f(4, 64), f(64))),
        "q4k_matmul": (lambda x, w: sk.q4k_matmul(x, w, 64), (f(1, 256), w4)),
        "q6k_matmul": (lambda x, w: sk.q6k_matmul(x, w, 64), (f(1, 256), w6)),
        "q8_0_matmul": (lambda x, w: sk.q8_0_matmul(x, w, 64), (f(1, 256), w8)),
        "q4k_gate_up_swiglu": (lambda x, g, u: sk.q4k_gate_up_swiglu(x, g, u, 64),
                               (f(1, 256), w4, w4)),
        "kv_scatter": (lambda s, c: sk.kv_scatter(s, c, 3), (f(2 * 64), f(2, 8, 64))),
        "rope": (sk.rope, (f(2, 2, 64), np.array([3, 9], np.int32))),
        "add": (sk.add, (f(64), f(64))),
        "paged_attention": (sk.paged_attention, (f(1, 2, 16), pages, pages,
                                                 np.array([[1, 2, 0]], np.int32),
                                                 np.array([9], np.int32))),
        "paged_kv_scatter": (sk.paged_kv_scatter, (f(1, 2, 16), f(1, 2, 16), f(3, 2, 4, 16),
                                                   f(3, 2, 4, 16), np.array([5], np.int32))),
    }


def _host(v):
    """A result's contents on the host (a tuple of results, as paged_kv_scatter's, element-wise)."""
    if isinstance(v, tuple):
        return tuple(_host(a) for a in v)
    return None if v is None else v.copy_to_host()


@pytest.mark.parametrize("name", sorted(_stdlib_cases()))
def test_every_device_stdlib_function_captures_under_the_rules(fake, name):
    """Eager and captured-then-replayed results agree on the fake GPU (which runs the PTX),
    and no call of the capture broke a rule.  (gemm, decode_attention, flash_attention,
    layernorm and swiglu do not keep DeviceArrays on the device yet — they return numpy or
    refuse them — so inside a graph they are refused like any host round trip.)"""
    fn, args = _stdlib_cases()[name]
    eager_in = [pyptx.to_device(a) for a in args]
    want = _host(fn(*eager_in))
    want_state = [a.copy_to_host() for a in eager_in]
    cap_in = [pyptx.to_device(a) for a in args]
    with pyptx.graph() as g:
        out = fn(*cap_in)
    g.launch()
    got = _host(out)
    assert fake.violations == []
    if want is not None:
        np.testing.assert_array_equal(got, want)
    for a, s in zip(cap_in, want_state):          # in-place functions wrote the same
        np.testing.assert_array_equal(a.copy_to_host(), s)
