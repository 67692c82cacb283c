"""stdlib_kernels.llama against transformers on the same GGUF file.

Each model is a seeded transformers LlamaForCausalLM written to GGUF as llama.cpp's
convert_hf_to_gguf.py does (tests/llama_models.py); the reference is transformers' own GGUF
loader on that file (it undoes the Q/K row permutation and dequantises with gguf-py, so neither
the permutation nor the quantised formats are checked against themselves).  pyptx runs the
prefill (two `forward` calls: the second one's queries attend to the first's cached keys)
and 8 `step`s (the decode graph); transformers runs the whole sequence once, and its logits at
every position are the reference for both (a causal model's logits at t depend on tokens ≤ t).
Greedy tokens are pyptx's argmax fed back; transformers' argmax at each position must agree.

Error analysis (errors relative to max |logit| of the reference; measured worst case → bound):
* float32 weights: both sides compute in float32 with different summation orders (tiled GEMM,
  flash attention's online softmax, rope tables) — worst measured 5.9e-7 (prefill) / 5.1e-7
  (decode), bound 1e-5.
* F16 / BF16 weights: decoded exactly to float32 on both sides, so as float32 — measured 8.2e-7,
  bound 1e-5.
* Q4_K/Q6_K/Q8_0 weights: both sides use the same dequantised values, but pyptx's decode GEMVs
  (and prefill matmuls of ≤ 8 rows) quantise the activations to int8 + an int8 residual per 32
  (relative error ≈ 2^-15 per activation, see qmatmul's dp4a path), and so does the int8
  tensor-core path of prefill matmuls > 8 rows ("mma": the same quantised activations) —
  measured 7.2e-6 in the fast test, 4.4e-5 worst over the slow matrix (two layers, head_dim
  64) when prefill took the f32 tiled path; bound 5e-4.
"""
from __future__ import annotations

import io
import os
import sys
import contextlib

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
import llama_models as LM  # noqa: E402

import stdlib_kernels as sk  # noqa: E402
from stdlib_kernels.llama import Llama, Tokenizer, read_gguf  # noqa: E402

TOL_FLOAT = 1e-5
TOL_QUANT = 5e-4
PROMPT = [1, 17, 300, 42, 9, 250, 77, 5, 120, 33, 64, 200]


def _reference(path, ids):
    with torch.no_grad():
        return LM.hf_from_gguf(path)(torch.tensor([ids])).logits[0].numpy()


def _run(path, split, n_steps, **kw):
    """pyptx: prefill PROMPT in two forwards (at `split`), then n_steps greedy steps.
    Returns (all tokens, logits [len(PROMPT) + n_steps, vocab] for positions 0..)."""
    kw.setdefault("kv_dtype", "f32")
    m = Llama.from_gguf(path, max_seq=kw.pop("max_seq", 32), **kw)
    logits = [m.forward(PROMPT[:split]), m.forward(PROMPT[split:])]
    toks = list(PROMPT)
    last = logits[-1][-1]
    for _ in range(n_steps):
        toks.append(int(np.argmax(last)))
        last = m.step(toks[-1])
        logits.append(last[None])
    assert m.length == len(toks)
    return toks, np.concatenate(logits), m


def _compare(path, tol, split=7, n_steps=8, **kw):
    toks, got, m = _run(path, split, n_steps, **kw)
    want = _reference(path, toks)
    scale = np.abs(want).max()
    err_prefill = np.abs(got[:len(PROMPT)] - want[:len(PROMPT)]).max() / scale
    err_decode = np.abs(got[len(PROMPT):] - want[len(PROMPT):]).max() / scale
    print(f"{os.path.basename(path)}: prefill {err_prefill:.2e}, decode {err_decode:.2e}")
    assert err_prefill <= tol and err_decode <= tol, (err_prefill, err_decode)
    # greedy tokens: transformers' argmax at every position agrees with pyptx's choice
    assert list(np.argmax(want[len(PROMPT) - 1:-1], axis=1)) == toks[len(PROMPT):]
    return m


def test_f32_head64_gqa_untied_theta1e4(tmp_path):
    model = LM.hf_model(vocab=384, hidden=256, heads=4, kv_heads=2, ffn=256, theta=10000.0)
    path = LM.write_gguf(model, str(tmp_path / "f32.gguf"), "f32")
    m = _compare(path, TOL_FLOAT)
    assert not m.tied


def test_quant_mix_head128_tied_theta5e5(tmp_path):
    """Q4_K / Q6_K / Q8_0 (llama.cpp's Q4_K_M flavour); head_dim 128, one KV head for two
    query heads, tied output (the Q4_K embedding is the output matrix), rope base 500000;
    a 10-token first forward runs the int8 tensor-core quantised GEMMs (> 8 rows)."""
    model = LM.hf_model(vocab=384, hidden=256, heads=2, kv_heads=1, ffn=512, tied=True,
                        theta=500000.0)
    path = LM.write_gguf(model, str(tmp_path / "q.gguf"), "quant")
    types = {n: w.kind for n, w in read_gguf(path).weights.items()}
    assert {"Q4_K", "Q6_K", "Q8_0"} <= set(types.values()) and "output.weight" not in types
    m = _compare(path, TOL_QUANT, split=10, n_steps=4)
    assert m.tied


#: f16 KV cache: K and V rounded to f16 (relative 2^-11 each) before attention; through the
#: softmax weights and the V sum that moves each attention output by about that much of |v|,
#: and the logits by the same order relative to their largest (measured 1.2e-4 prefill,
#: 9.5e-5 decode on this model; bound ~10x)
TOL_KV16 = 1.5e-3


def test_f16_kv_cache_against_transformers(tmp_path):
    """The default float16 KV cache (half the bytes of f32): prefill reads it back through the
    gather kernel, decode through paged_attention's f16 path; logits within the f16 rounding
    bound of transformers' (f32 cache), identical greedy tokens."""
    model = LM.hf_model(vocab=384, hidden=256, heads=4, kv_heads=2, ffn=256, theta=10000.0)
    path = LM.write_gguf(model, str(tmp_path / "kv16.gguf"), "f32")
    m = _compare(path, TOL_KV16, kv_dtype="f16")
    m32 = Llama.from_gguf(path, max_seq=32, kv_dtype="f32")
    assert m.kv_dtype == "f16" and m.kv_bytes() * 2 == m32.kv_bytes()


def test_f16_bf16_two_layers_gqa4(tmp_path):
    """F16 and BF16 matrices in one file, two layers, four query heads per KV head."""
    model = LM.hf_model(vocab=384, hidden=256, layers=2, heads=4, kv_heads=1, ffn=256)
    types = {"token_embd.weight": "BF16", "output.weight": "F16"}
    for i in range(2):
        types.update({f"blk.{i}.attn_v.weight": "BF16", f"blk.{i}.ffn_down.weight": "BF16"})
    path = LM.write_gguf(model, str(tmp_path / "h.gguf"), "f16", types=types)
    kinds = {w.kind for w in read_gguf(path).weights.values()}
    assert {"F16", "BF16", "F32"} <= kinds
    _compare(path, TOL_FLOAT, split=5, n_steps=3)


@pytest.mark.slow
@pytest.mark.parametrize("mix", ["f32", "f16", "bf16", "quant"])
@pytest.mark.parametrize("heads,kv", [(4, 2), (2, 1)])
def test_matrix(tmp_path, mix, heads, kv):
    model = LM.hf_model(vocab=512, hidden=256, layers=2, heads=heads, kv_heads=kv, ffn=512,
                        tied=heads == 2, theta=500000.0 if kv == 1 else 10000.0, seed=3)
    path = LM.write_gguf(model, str(tmp_path / "m.gguf"), mix)
    _compare(path, TOL_QUANT if mix == "quant" else TOL_FLOAT, page_size=8)


# ---- generate, CLI ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small F32 model file (no kernel runs needed for the error tests)."""
    model = LM.hf_model(vocab=384, hidden=64, heads=2, kv_heads=1, ffn=64)
    return LM.write_gguf(model, str(tmp_path_factory.mktemp("m") / "small.gguf"), "f32")


def test_generate_and_cli(small, capsys):
    from stdlib_kernels.llama.__main__ import main
    m = Llama.from_gguf(small, max_seq=16, kv_dtype="f32")
    prompt = [1, 5, 9]
    out = m.generate(prompt, 4)
    assert len(out) == 4 and m.length == len(prompt) + 3
    want = _reference(small, prompt + out[:-1])
    assert list(np.argmax(want[len(prompt) - 1:], axis=1)) == out
    m.reset()
    assert m.generate(prompt, 4) == out                          # reset → the same greedy run
    sampled = m.generate(prompt, 4, temperature=0.8, seed=1)
    assert m.generate(prompt, 4, temperature=0.8, seed=1) == sampled
    assert m.kv_bytes() == 2 * 1 * 16 * 1 * 32 * 4             # K+V, layers, slots, kv, hd, f32
    assert main([small, "--prompt-ids", "1,5,9", "--max-new", "4"]) == 0
    text = capsys.readouterr()
    assert "ids: " + ",".join(map(str, out)) in text.out and "tokens/s" in text.out
    assert "[4/4]" in text.err
    assert main([small, "--prompt", "the fox", "--max-new", "2"]) == 0
    tok = Tokenizer.from_gguf(small)
    assert "prompt ids: " + ",".join(map(str, tok.encode("the fox"))) in capsys.readouterr().out


# ---- errors ---------------------------------------------------------------------------------------

def test_errors_file(tmp_path, small):
    model = LM.hf_model(vocab=384, hidden=64, heads=2, kv_heads=1, ffn=64)
    bad = tmp_path / "not.gguf"
    bad.write_bytes(b"definitely not a gguf file")
    with pytest.raises(ValueError, match="not a readable GGUF"):
        Llama.from_gguf(bad, kv_dtype="f32")
    p = LM.write_gguf(model, str(tmp_path / "gpt2.gguf"), arch="gpt2")
    with pytest.raises(ValueError, match="architecture 'gpt2'"):
        Llama.from_gguf(p, kv_dtype="f32")
    for key in ("llama.context_length", "llama.attention.layer_norm_rms_epsilon",
                "llama.block_count"):
        p = LM.write_gguf(model, str(tmp_path / "k.gguf"), drop_keys=(key,))
        with pytest.raises(ValueError, match=key.replace(".", r"\.")):
            Llama.from_gguf(p, kv_dtype="f32")
    p = LM.write_gguf(model, str(tmp_path / "t.gguf"), types={"blk.0.attn_k.weight": "Q4_0"})
    with pytest.raises(ValueError, match=r"'blk\.0\.attn_k\.weight' has type Q4_0"):
        Llama.from_gguf(p, kv_dtype="f32")
    assert Llama.from_gguf(small, max_seq=16).kv_dtype == "f16"   # the default
    with pytest.raises(ValueError, match="kv_dtype"):
        Llama.from_gguf(small, kv_dtype="f64")


def test_errors_ids_and_length(small):
    m = Llama.from_gguf(small, max_seq=8, kv_dtype="f32")
    for bad in ([1, 384], [-1], [3, 1000]):
        with pytest.raises(ValueError, match=f"token id {bad[-1]}"):
            m.forward(bad)
    with pytest.raises(ValueError, match="token id 384"):
        m.step(384)
    with pytest.raises(TypeError):
        m.forward([1.5])
    with pytest.raises(ValueError, match="non-empty"):
        m.forward([])
    with pytest.raises(ValueError, match="exceeds max_seq 8"):
        m.forward(list(range(9)))
    with pytest.raises(ValueError, match="max_seq is 8"):
        m.generate([1, 2, 3], 7)
    assert m.length == 0                                         # nothing was cached


# ---- tokenizer ------------------------------------------------------------------------------------

TEXTS = ["the quick brown fox", "Hello World!  two  spaces", "théâtre 東京 straße",
         "it's 12345 dogs.\nnew line", "The jolly sphinx, 2024; we'll see", ""]


@pytest.mark.parametrize("kind", ["spm", "bpe"])
def test_tokenizer_matches_transformers(tmp_path, kind):
    from transformers import AutoTokenizer
    tok = LM.spm_vocab(384) if kind == "spm" else LM.bpe_vocab(384)
    model = LM.hf_model(vocab=384, hidden=64, heads=2, kv_heads=1, ffn=64)
    LM.write_gguf(model, str(tmp_path / "m.gguf"), tokenizer=tok)
    mine = Tokenizer.from_gguf(tmp_path / "m.gguf")
    hf = AutoTokenizer.from_pretrained(tmp_path, gguf_file="m.gguf")
    texts = TEXTS + (["<|begin_of_text|>the dog<|end_of_text|>"] if kind == "bpe" else [])
    for text in texts:
        ids = mine.encode(text)
        assert ids == hf(text)["input_ids"], text
        assert mine.decode(ids) == text.replace("<|begin_of_text|>", "").replace(
            "<|end_of_text|>", "")
    assert mine.encode("the", add_special=False)[0] != mine.bos
    if kind == "spm":
        # llama.cpp's space prefix (transformers differs here): also after a special token,
        # and a second one before text that already starts with a space
        sp = mine.ids["\u2581"]
        assert mine.encode(" the", add_special=False)[0] == sp
        assert mine.encode("<s>the") == [1, 1] + mine.encode("the", add_special=False)
        assert mine.decode(mine.encode("東 ß")) == "東 ß"                # byte fallback


def test_tokenizer_errors(tmp_path):
    model = LM.hf_model(vocab=384, hidden=64, heads=2, kv_heads=1, ffn=64)
    p = LM.write_gguf(model, str(tmp_path / "m.gguf"), drop_keys=("tokenizer.ggml.scores",))
    with pytest.raises(ValueError, match="tokenizer.ggml.scores"):
        Tokenizer.from_gguf(p)
    p = LM.write_gguf(model, str(tmp_path / "m.gguf"))
    with pytest.raises(ValueError, match="token id 999"):
        Tokenizer.from_gguf(p).decode([999])
