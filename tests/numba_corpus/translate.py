"""The Numba -> pyptx spelling table of docs/coming-from-numba.md as source rewrites: a copy of
`kernels.py` written with pyptx's own names (`pyptx.grid`, `pyptx.atomic_add`, ...)."""
import re

from pyptx.cuda import parse_signature


def _typed_device(m: re.Match) -> str:
    """`@cuda.jit("int32(float32, f4)", device=True)` + `def f(a, b):` -> annotated func."""
    args, _ = parse_signature(m.group(1))
    names = [n.strip() for n in m.group(3).split(",")]
    params = ", ".join(f"{n}: {t!r}" for n, t in zip(names, args))
    return f"@pyptx.func\ndef {m.group(2)}({params}):"


RULES = [
    (r"from pyptx import cuda", "import pyptx\nfrom pyptx import *"),
    (r"@cuda\.jit\(\"([^\"]*)\",\s*device=True\)\s*\ndef (\w+)\(([^)]*)\):", _typed_device),
    (r"@cuda\.jit\([^)]*device=True\)", "@pyptx.func"),
    (r"@cuda\.jit\(\"[^\"]*\"\)", "@pyptx.kernel"),
    (r"@cuda\.jit", "@pyptx.kernel"),
    (r"cuda\.threadIdx", "pyptx.thread_idx"), (r"cuda\.blockIdx", "pyptx.block_idx"),
    (r"cuda\.blockDim", "pyptx.block_dim"), (r"cuda\.gridDim", "pyptx.grid_dim"),
    (r"cuda\.laneid", "pyptx.lane_id()"), (r"cuda\.warpsize", "pyptx.WARP_SIZE"),
    (r"cuda\.atomic\.(\w+)\(", r"pyptx.atomic_\1("),
    (r"cuda\.shfl_sync\([^,]+,\s*", "pyptx.shfl_idx("),
    (r"cuda\.shfl_(up|down|xor)_sync\([^,]+,\s*", r"pyptx.shfl_\1("),
    (r"cuda\.(all|any)_sync\([^,]+,\s*", r"pyptx.vote_\1("),
    (r"cuda\.eq_sync\([^,]+,\s*", "pyptx.vote_uni("),
    (r"cuda\.ballot_sync\([^,]+,\s*", "pyptx.ballot("),
    (r"cuda\.match_(any|all)_sync\(cuda\.activemask\(\),\s*", r"pyptx.match_\1("),
    (r"cuda\.fma\(", "pyptx.math.fma("),
    (r"cuda\.const\.array_like\(", "pyptx.const_array("),
    (r"(?<![.\w])math\.(\w+)\(", r"pyptx.math.\1("),
    (r"cuda\.", "pyptx."),         # grid gridsize shared local syncthreads* popc ffs activemask ...
]


def to_pyptx(source: str) -> str:
    for pat, rep in RULES:
        source = re.sub(pat, rep, source)
    assert "cuda." not in source.replace("Numba-CUDA", "")
    return source
