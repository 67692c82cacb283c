"""`Llama.use_graph`: decode by one graph replay (the default) or launch by launch (for profiling
and debugging) — the same logits, bit for bit, on the CPU executor and on the fake GPU (whose
graph replays run the captured launches on the CPU executor).  The model is the tiny
Q4_K/Q6_K/Q8_0 GGUF of examples/llama_decode.py (its `write_model`)."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

pytest.importorskip("gguf")

from fake_driver import on_fake_gpu  # noqa: E402
from fake_graph import GraphFakeDriver  # noqa: E402
from stdlib_kernels.llama import Llama  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROMPT = [1, 17, 300]
STEPS = 3


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    spec = importlib.util.spec_from_file_location(
        "_llama_decode_example", ROOT / "examples" / "llama_decode.py")
    ld = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ld)
    path = tmp_path_factory.mktemp("llama") / "tiny-llama.gguf"
    ld.write_model(str(path), np.random.default_rng(0))
    return str(path)


@pytest.fixture(params=["cpu", "fake-gpu"])
def on(request, monkeypatch):
    if request.param == "cpu":
        monkeypatch.setenv("PYPTX_DEVICE", "cpu")
        yield "cpu"
    else:
        yield from on_fake_gpu(monkeypatch, GraphFakeDriver())


def greedy(m, modes):
    """Prefill PROMPT, then one greedy step per entry of `modes` (use_graph for that step)."""
    m.reset()
    out = [m.forward(PROMPT)[-1]]
    for use_graph in modes:
        m.use_graph = use_graph
        out.append(m.step(int(np.argmax(out[-1]))))
    return np.stack(out)


def test_launch_by_launch_steps_give_the_graph_replays_logits(model_path, on):
    m = Llama.from_gguf(model_path, max_seq=16, page_size=8, use_graph=False)
    assert m.use_graph is False
    direct = greedy(m, [False] * STEPS)
    assert m.decode_graph is None                     # nothing captured launch by launch
    replay = greedy(m, [True] * STEPS)
    assert m.decode_graph is not None and m.decode_graph.launches > 0
    np.testing.assert_array_equal(direct, replay)
    # switching mode mid-sequence continues the same cache
    np.testing.assert_array_equal(greedy(m, [False, True, False]), replay)
    assert Llama.from_gguf(model_path, max_seq=16).use_graph is True
