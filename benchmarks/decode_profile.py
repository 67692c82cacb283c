"""`python -m benchmarks.decode_profile [--steps 16]`: where the host time of a decode step goes.

The GPU check measures the tiny llama of examples/llama_decode.py at about 2,200 tokens/s with
one graph replay per token although one replay takes ~80 µs of GPU time, and at ~125 tokens/s
launch by launch (46 launches then: ~170 µs each, against ~13 µs for a bare launch; measured before
the example ran through `stdlib_kernels.llama.Llama`).  This prints cProfile's top functions
(own time) for both loops of `Llama.step` as the GPU check runs them (inputs written, one graph
replay — or the launches one by one with `use_graph = False` — logits copied back, argmax), to
show which host work to cut.  Runs wherever the
example runs (on the CPU executor the kernels dominate, so the numbers mean something on a GPU).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys

import numpy as np

from benchmarks.gpu_timings import decoder_setup


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--top", type=int, default=22)
    args = ap.parse_args(argv)
    import pyptx
    ld, m, _ref = decoder_setup()
    steps = min(args.steps, m.max_seq)

    def loop():                                            # Llama.step as the check runs it
        m.reset()
        token = ld.PROMPT[0]
        for _ in range(steps):
            token = int(np.argmax(m.step(token)))

    def replays():
        m.use_graph = True
        loop()

    def launches():
        m.use_graph = False
        loop()

    replays()                                              # warm: plans, pools, modules
    launches()
    for name, fn in (("graph replay per token", replays), ("launch by launch", launches)):
        prof = cProfile.Profile()
        prof.runcall(fn)
        print(f"== {name}: {steps} tokens on {pyptx.device()}")
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
