"""Launch graphs on the GPU path, up to the driver call boundary (tests/fake_graph.py): stream
capture on a pyptx stream, instantiate, cuGraphLaunch; replays see new DeviceArray data."""
from __future__ import annotations


import numpy as np
import pytest

import pyptx
from pyptx.runtime import streams

from fake_driver import hand_compiled, on_fake_gpu
from fake_graph import GraphFakeDriver
from test_driver_fake import SCALE, scale, scale_body, use_compiled


@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, GraphFakeDriver())


def _names(fake, start=0):
    return [c[0] for c in fake.calls[start:]
            if c[0].startswith(("cuStream", "cuGraph", "cuLaunch", "cuMemcpy"))]


def test_capture_instantiate_replay(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    fake.bodies["scale"] = scale_body
    r = np.random.default_rng(3)
    x0 = r.standard_normal(16).astype(np.float32)
    x = pyptx.to_device(x0)
    y = pyptx.to_device(np.full(16, np.nan, np.float32))
    z = pyptx.to_device(np.full(16, np.nan, np.float32))
    mark = len(fake.calls)
    with pyptx.graph() as g:
        scale[1, 16](y, x, 2.0, 16)
        scale[1, 16](z, y, -3.0, 16)
    assert np.isnan(y.copy_to_host()).all()               # captured, nothing ran
    begin = next(c for c in fake.calls[mark:] if c[0] == "cuStreamBeginCapture")
    stream, mode = begin[1]
    assert mode == fake.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL and stream
    assert int(stream) in fake.non_blocking            # legacy-stream work never meets it
    launches = [c for c in fake.calls[mark:] if c[0] == "cuLaunchKernel"]
    assert len(launches) == 2 and all(int(c[1][8]) == int(stream) for c in launches)
    assert _names(fake, mark) == ["cuStreamCreate", "cuStreamBeginCapture", "cuLaunchKernel",
                                  "cuLaunchKernel", "cuStreamEndCapture", "cuGraphInstantiate",
                                  "cuMemcpyDtoH"]
    user = streams.Stream()
    for _ in range(2):
        x1 = r.standard_normal(16).astype(np.float32)
        x.copy_from_host(x1)                             # the replay reads the new data
        g.launch(stream=user)
        np.testing.assert_array_equal(y.copy_to_host(), x1 * np.float32(2.0))
        np.testing.assert_array_equal(z.copy_to_host(), x1 * np.float32(2.0) * np.float32(-3))
    glaunch = [c for c in fake.calls if c[0] == "cuGraphLaunch"]
    assert len(glaunch) == 2 and int(glaunch[0][1][1]) == int(user.handle)
    g.close()
    assert fake.count("cuGraphExecDestroy") == 1 and fake.count("cuGraphDestroy") == 1
    assert fake.count("cuStreamDestroy") == 1


def test_numpy_inside_a_gpu_capture_raises_and_the_capture_ends(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    x = pyptx.to_device(np.ones(4, np.float32))
    with pytest.raises(pyptx.LaunchError, match="argument 'out': a numpy array"):
        with pyptx.graph() as g:
            scale[1, 4](np.zeros(4, np.float32), x, 1.0, 4)
    assert fake.capturing == {}                           # cuStreamEndCapture was called
    assert fake.count("cuGraphInstantiate") == 0 and fake.count("cuMemcpyHtoD") == 1
    assert fake.count("cuGraphDestroy") == 1
    with pytest.raises(pyptx.LaunchError, match="discarded"):
        g.launch()


def test_driver_failure_at_instantiate_is_a_device_error(fake, monkeypatch):
    use_compiled(monkeypatch, hand_compiled("scale", SCALE))
    x = pyptx.to_device(np.ones(4, np.float32))
    fake.fail["cuGraphInstantiate"] = fake.CUresult.CUDA_ERROR_OUT_OF_MEMORY
    with pytest.raises(pyptx.DeviceError, match="cuGraphInstantiate") as ei:
        with pyptx.graph() as g:
            scale[1, 4](x, x, 1.0, 4)
    assert ei.value.error_name == "CUDA_ERROR_OUT_OF_MEMORY"
    with pytest.raises(pyptx.LaunchError, match="discarded"):
        g.launch()
