"""python -m stdlib_kernels.llama MODEL.gguf (--prompt-ids 1,2,3 | --prompt "text") [--max-new N]

Loads a llama GGUF, prefills the prompt, decodes --max-new tokens (greedy unless
--temperature), printing a progress line to stderr, then the generated ids (and the text when
the file carries a vocabulary) and tokens/s of prefill and decode on stdout.
"""
from __future__ import annotations

import argparse
import sys
import time


def _ids(text: str) -> list:
    try:
        return [int(t) for t in text.replace(" ", "").split(",") if t != ""]
    except ValueError:
        raise SystemExit(f"--prompt-ids must be comma-separated integers, got {text!r}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stdlib_kernels.llama",
                                 description="Generate with a llama GGUF model on stdlib "
                                             "kernels.")
    ap.add_argument("model", help="the .gguf file")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt-ids", help="prompt token ids, comma-separated")
    src.add_argument("--prompt", help="prompt text (tokenized with the file's vocabulary)")
    ap.add_argument("--max-new", type=int, default=32, help="tokens to generate (default 32)")
    ap.add_argument("--max-seq", type=int, default=None,
                    help="KV cache length (default: prompt + max-new)")
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--page-size", type=int, default=16)
    args = ap.parse_args(argv)

    from . import Llama, Tokenizer
    tok = None
    try:
        if args.prompt is not None:
            tok = Tokenizer.from_gguf(args.model)
            prompt = tok.encode(args.prompt)
        else:
            prompt = _ids(args.prompt_ids)
            try:
                tok = Tokenizer.from_gguf(args.model)
            except ValueError:
                tok = None
        if not prompt:
            raise SystemExit("the prompt is empty")
        max_seq = args.max_seq or len(prompt) + max(args.max_new, 1)
        t0 = time.perf_counter()
        model = Llama.from_gguf(args.model, max_seq=max_seq, kv_dtype="f32",
                                page_size=args.page_size)
    except (ValueError, FileNotFoundError, NotImplementedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"loaded {args.model} in {time.perf_counter() - t0:.1f} s "
          f"({model.hparams.n_layers} layers, dim {model.hparams.dim}, vocab {model.vocab}, "
          f"KV cache {model.kv_bytes() / 2**20:.1f} MiB)", file=sys.stderr)
    times = []

    def progress(token):
        times.append(time.perf_counter())
        n = len(times)
        rate = (n - 1) / (times[-1] - times[0]) if n > 1 else 0.0
        print(f"\r[{n}/{args.max_new}] token {token}  {rate:.2f} tokens/s", end="",
              file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    try:
        out = model.generate(prompt, args.max_new, temperature=args.temperature,
                             seed=args.seed, on_token=progress)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(file=sys.stderr)
    prefill_s = (times[0] - t0) if times else time.perf_counter() - t0
    decode_n = len(times) - 1
    decode_s = times[-1] - times[0] if decode_n > 0 else 0.0
    print("prompt ids: " + ",".join(map(str, prompt)))
    print("ids: " + ",".join(map(str, out)))
    if tok is not None:
        print("text: " + repr(tok.decode(out)))
    print(f"prefill: {len(prompt)} tokens in {prefill_s:.2f} s "
          f"({len(prompt) / max(prefill_s, 1e-9):.2f} tokens/s)")
    if decode_n > 0:
        print(f"decode: {decode_n} tokens in {decode_s:.2f} s "
              f"({decode_n / decode_s:.2f} tokens/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
