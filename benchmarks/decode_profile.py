"""`python -m benchmarks.decode_profile [--steps 16]`: where the host time of a decode step goes.

The GPU check measures the tiny llama of examples/llama_decode.py at about 2,200 tokens/s with
one graph replay per token although one replay takes ~80 µs of GPU time, and at ~125 tokens/s
launch by launch (46 launches: ~170 µs each, against ~13 µs for a bare launch).  This prints
cProfile's top functions (own time) for both loops, as the GPU check runs them (inputs written,
replay or step, logits copied back, argmax), to show which host work to cut.  Runs wherever the
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
    ld, dec, _ref = decoder_setup()
    dec.set_inputs(ld.PROMPT[0], 0)
    dec.step()
    with pyptx.graph() as g:
        replay_logits, _ = dec.step()

    def replays():
        token = ld.PROMPT[0]
        for t in range(args.steps):
            dec.set_inputs(token, t)
            g.launch()
            token = int(np.argmax(replay_logits.copy_to_host()))

    def steps():
        token = ld.PROMPT[0]
        for t in range(args.steps):
            dec.set_inputs(token, t)
            logits, _ = dec.step()
            token = int(np.argmax(logits.copy_to_host()))

    replays()                                              # warm: plans, pools, modules
    steps()
    for name, loop in (("graph replay per token", replays), ("launch by launch", steps)):
        prof = cProfile.Profile()
        prof.runcall(loop)
        print(f"== {name}: {args.steps} tokens on {pyptx.device()}")
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
