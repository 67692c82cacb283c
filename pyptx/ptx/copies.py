"""Block arguments become moves on the incoming edge; those moves are a *parallel* copy.

Why: `br ^loop(%b, %a)` into `^loop(%a, %b)` swaps two values.  Emitting the moves one after
another would clobber `%a` before it is read, so the copies are ordered so that no register is
written while a pending copy still reads it, and a cycle is broken with one temporary.
"""
from __future__ import annotations


def sequentialize(copies: list[tuple[str, str, str]], new_temp) -> list[tuple[str, str, str]]:
    """Order parallel copies `(dst, src, mov_suffix)` into sequential ones.

    `src` is a register or an immediate; `new_temp(dst)` returns a fresh register of dst's class.
    Copies whose source already is their destination disappear.
    """
    pending = [c for c in copies if c[0] != c[1]]
    out: list[tuple[str, str, str]] = []
    while pending:
        read = {src for _, src, _ in pending}
        for i, copy in enumerate(pending):
            if copy[0] not in read:          # nobody still needs the old value of this dst
                out.append(copy)
                del pending[i]
                break
        else:                                # every dst is still read: a cycle
            dst, _, suffix = pending[0]
            tmp = new_temp(dst)
            out.append((tmp, dst, suffix))
            pending = [(d, tmp if s == dst else s, m) for d, s, m in pending]
    return out
