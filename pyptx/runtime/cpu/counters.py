"""Profiler counters of one CPU launch, counted the way the GPU counts them.

* instructions: per executed op, the number of warps with at least one active thread.
* global memory: per warp request, the bytes the active threads asked for and the distinct
  32-byte sectors they touch (the coalescing rule of the memory system).
* shared memory: 32 banks of 4 bytes; a request is served in wavefronts, one per distinct word
  in the most-loaded bank (threads reading one word share it).  Accesses of 8 bytes are
  processed per half-warp and of 16 bytes per quarter-warp (128 bytes per wavefront), so a
  conflict-free 64-bit request takes 2 wavefronts and is counted as 0 conflicts; the counter is
  the wavefronts beyond that minimum.
* branches: per warp executing a branch, divergent when its active threads went both ways.
* flops: add/sub/mul = 1, fma = 2 per active thread on any float type.
"""
from __future__ import annotations

import numpy as np

from .opkinds import BRANCH


def _lanes(st, sel):
    return st.tidx if sel is None else sel


def _n_warps(st, lanes) -> int:
    """Distinct warps among sorted lanes."""
    if lanes.size == 0:
        return 0
    w = st.warp_id[lanes]
    return 1 + int(np.count_nonzero(w[1:] != w[:-1]))


class Counters:
    def __init__(self):
        self.instructions: dict = {}
        self.global_bytes = self.global_sectors = self.shared_bank_conflicts = 0
        self.branches = self.divergent_branches = self.flops = 0

    def executed(self, st, sel, cls, flops) -> None:
        lanes = _lanes(st, sel)
        self.instructions[cls] = self.instructions.get(cls, 0) + _n_warps(st, lanes)
        if flops:
            self.flops += flops * lanes.size

    def control(self, st, kind, cls, lanes, taken) -> None:
        lanes = _lanes(st, lanes)
        n = _n_warps(st, lanes)
        self.instructions[cls] = self.instructions.get(cls, 0) + n
        if kind != BRANCH or n == 0:
            return
        self.branches += n
        if taken is None or taken is lanes or taken.size == lanes.size:
            return
        tot = np.bincount(st.warp_id[lanes], minlength=st.n_warps)
        tk = np.bincount(st.warp_id[taken], minlength=st.n_warps)
        self.divergent_branches += int(np.count_nonzero((tk > 0) & (tk < tot)))

    def memory(self, st, space, sel, idx, nbytes) -> None:
        lanes = _lanes(st, sel)
        if lanes.size == 0:
            return
        w = st.warp_id[lanes].astype(np.int64)
        if space == "global":
            self.global_bytes += nbytes * lanes.size
            first = idx >> 5
            last = (idx + (nbytes - 1)) >> 5
            keys = (w << 40) | first
            if (last != first).any():
                span = np.concatenate([np.arange(f, l_ + 1) for f, l_ in zip(first, last)])
                owner = np.repeat(w, last - first + 1)
                keys = (owner << 40) | span
            self.global_sectors += int(np.unique(keys).size)
        elif space == "shared":
            self.shared_bank_conflicts += self._bank_conflicts(st, lanes, w, idx, nbytes)

    @staticmethod
    def _bank_conflicts(st, lanes, w, idx, nbytes) -> int:
        words_per_lane = max(1, nbytes // 4)
        phases = min(words_per_lane, 32)                  # 8 B: half-warps, 16 B: quarter-warps
        off = idx - st.blk[lanes] * st.shared.stride      # byte offset in the block's memory
        phase = w * phases + st.lane[lanes] // (32 // phases)
        word = (off >> 2)[:, None] + np.arange(words_per_lane)
        phase = np.repeat(phase, words_per_lane)
        word = word.ravel()
        keys = np.unique((phase << 30) | ((word & 31) << 24) | word)   # (phase, bank, word)
        phase_bank, per_bank = np.unique(keys >> 24, return_counts=True)
        ph = phase_bank >> 6
        starts = np.flatnonzero(np.r_[True, ph[1:] != ph[:-1]])
        wavefronts = np.maximum.reduceat(per_bank, starts)
        return int((wavefronts - 1).sum())

    def record(self, kernel, grid, block):
        from ..profiler import LaunchRecord
        return LaunchRecord(kernel=kernel, grid=grid, block=block, device="cpu",
                            instructions=dict(sorted(self.instructions.items())),
                            global_bytes=self.global_bytes, global_sectors=self.global_sectors,
                            shared_bank_conflicts=self.shared_bank_conflicts,
                            branches=self.branches, divergent_branches=self.divergent_branches,
                            flops=self.flops)
