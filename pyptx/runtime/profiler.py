"""What `pyptx.profile()` records: one `LaunchRecord` per launch, and the table `print(prof)`
shows.  The CPU executor fills the counters (runtime/cpu/counters.py); a GPU launch fills only
`gpu_ms` (CUDA events) and leaves every counter None.  (Not to be confused with
`runtime/profile.py`, which describes the GPU *architecture*.)
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LaunchRecord:
    """One launch.  Counters are warp-level like the GPU's: `instructions` counts executed warp
    instructions (with at least one active thread) by class; `global_sectors` counts 32-byte
    sectors per warp request; `shared_bank_conflicts` counts wavefronts beyond the minimum."""
    kernel: str
    grid: tuple
    block: tuple
    device: str = "cpu"
    instructions: dict | None = None
    global_bytes: int | None = None
    global_sectors: int | None = None
    shared_bank_conflicts: int | None = None
    branches: int | None = None
    divergent_branches: int | None = None
    flops: int | None = None
    gpu_ms: float | None = None

    @property
    def coalescing(self) -> float | None:
        """global_bytes / (32 * global_sectors): 1.0 when every fetched byte was asked for."""
        if self.global_sectors is None:
            return None
        return self.global_bytes / (32 * self.global_sectors) if self.global_sectors else 1.0

    @property
    def branch_divergence(self) -> float | None:
        """Fraction of executed warp branches whose active threads did not all go one way."""
        if self.branches is None:
            return None
        return self.divergent_branches / self.branches if self.branches else 0.0

    @property
    def arithmetic_intensity(self) -> float | None:
        """flops per DRAM byte, the DRAM traffic estimated as 32 bytes per sector."""
        if self.flops is None:
            return None
        return self.flops / (32 * self.global_sectors) if self.global_sectors else float("inf")

    @property
    def total_instructions(self) -> int | None:
        return None if self.instructions is None else sum(self.instructions.values())


_COLUMNS = (   # header, how to get it, format
    ("kernel", lambda r: r.kernel, "{}"),
    ("grid", lambda r: _dim(r.grid), "{}"),
    ("block", lambda r: _dim(r.block), "{}"),
    ("warp instrs", lambda r: r.total_instructions, "{:,}"),
    ("global bytes", lambda r: r.global_bytes, "{:,}"),
    ("sectors", lambda r: r.global_sectors, "{:,}"),
    ("coalescing", lambda r: r.coalescing, "{:.2f}"),
    ("bank confl.", lambda r: r.shared_bank_conflicts, "{:,}"),
    ("divergence", lambda r: r.branch_divergence, "{:.2f}"),
    ("flops", lambda r: r.flops, "{:,}"),
    ("flop/byte", lambda r: r.arithmetic_intensity, "{:.3f}"),
    ("gpu ms", lambda r: r.gpu_ms, "{:.3f}"),
)


def _dim(t) -> str:
    t = tuple(t)
    while len(t) > 1 and t[-1] == 1:
        t = t[:-1]
    return "x".join(map(str, t))


@dataclass
class Profile:
    """The launches recorded inside one `with pyptx.profile() as prof:` block."""
    launches: list = field(default_factory=list)

    def __str__(self) -> str:
        if not self.launches:
            return "pyptx.profile: no launches recorded"
        cols = [c for c in _COLUMNS if any(c[1](r) is not None for r in self.launches)]
        rows = [[("-" if c[1](r) is None else c[2].format(c[1](r))) for c in cols]
                for r in self.launches]
        widths = [max(len(c[0]), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
        fmt = lambda cells: "  ".join(  # noqa: E731
            s.ljust(w) if i == 0 else s.rjust(w) for i, (s, w) in enumerate(zip(cells, widths)))
        lines = [fmt([c[0] for c in cols]), "  ".join("-" * w for w in widths)]
        lines += [fmt(row) for row in rows]
        classes = sorted({k for r in self.launches for k in (r.instructions or {})})
        if classes:
            lines.append("")
            lines.append("warp instructions by class:")
            for i, r in enumerate(self.launches):
                if r.instructions is None:
                    continue
                mix = ", ".join(f"{k} {r.instructions[k]:,}" for k in classes
                                if r.instructions.get(k))
                lines.append(f"  [{i}] {r.kernel}: {mix}")
        return "\n".join(lines)

    __repr__ = __str__
