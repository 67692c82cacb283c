"""One function's emission: registers, parameters, block layout, branches and edge copies.

The per-op lowerings live in `lower_*.py` and talk to the `FunctionEmitter` through a handful of
helpers (`dst`, `reg`, `src`, `tmp`, `i`, `need`).  This module owns what is not per-op: one
virtual register per SSA value (ptxas allocates the real ones), parameter loading, block
arguments as parallel copies on edges (critical edges split), fallthrough-aware layout, source
line comments, and putting the module text together.
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.core import Const, Function, Instr
from ..ir.ops import OPS
from ..types import PtrType
from . import tables as tb
from .copies import sequentialize
from .names import Namer, ascii_text, immediate

#: op -> lowering function(em, instr); filled by the lower_* modules
LOWERINGS: dict = {}

#: PTX mnemonics the emitter writes itself, outside any op's lowering: parameter loads
#: (`ld.param`, `cvta.to.global`, `setp` for bool parameters) and constants moved to registers
EMITTER_MNEMONICS = frozenset({"ld", "cvta", "setp", "mov"})


def _gated(lower, feature: str):
    """`lower` preceded by the check of the feature every use of the op needs (its record's
    `gate`): the lowering itself then only checks what depends on types."""
    def gated(em, ins):
        em.need(feature, ins)
        lower(em, ins)
    return gated


def lowers(*ops):
    """Decorator registering a lowering for IR ops (each must have a record in `ir.ops.OPS`;
    an op whose record has a `gate` gets the feature check wrapped around its lowering)."""
    def deco(f):
        for op in ops:
            gate = OPS[op].gate
            LOWERINGS[op] = f if gate is None else _gated(f, gate[0])
        return f
    return deco


#: a tensor-map parameter (`pyptx.tensormap`, IR type ptr.param<u8>): 128 bytes, 64-aligned
TENSOR_MAP_DECL, TENSOR_MAP_DIMS = ".align 64 .b8", "[128]"


def _is_tmap(t) -> bool:
    return isinstance(t, PtrType) and t.space == "param"


def param_decl(t) -> str:
    """The `.param` type of an entry parameter of IR type t."""
    if _is_tmap(t):
        return TENSOR_MAP_DECL
    return ".u64" if isinstance(t, PtrType) else f".{tb.suffixes(t).param}"


def param_ptx_type(t) -> str:
    """The parameter's PTX type as `KernelParam.ptx_type` names it ('u64', 's32', 'b8[128]')."""
    if _is_tmap(t):
        return "b8" + TENSOR_MAP_DIMS
    return "u64" if isinstance(t, PtrType) else tb.suffixes(t).param


class FunctionEmitter:
    """State of one `emit` call.  Lowerings append finished lines to `self.out`."""

    def __init__(self, fn: Function, arch: str, line_comments: bool):
        if arch not in tb.ARCH_MIN_ISA:
            raise CompileError(f"the PTX backend does not know arch {arch!r}; use one of "
                               f"{', '.join(sorted(tb.ARCH_MIN_ISA))}")
        self.fn = fn
        self.arch = arch
        self.sm = tb.arch_number(arch)
        min_arch = int(fn.attrs.get("min_arch") or 0)
        if self.sm < min_arch:
            raise CompileError(f"{fn.name} needs sm_{min_arch} or newer; it was compiled for "
                               f"{arch}: compile with arch='sm_{min_arch}' or newer", fn.attrs.get("source_file"), fn.attrs.get("first_line"))
        self.isa = tb.ARCH_MIN_ISA[arch]
        self.line_comments = line_comments
        self.out: list[str] = []
        self.counts = dict.fromkeys(tb.REG_CLASSES, 0)
        self.regs: dict = {}
        self.namer = Namer()
        self.entry_name = self.namer(fn.name)
        self.symbols: dict[str, str] = {}          # MemDecl name -> PTX symbol
        self.strings: list[bytes] = []             # printf format strings ($str<N>)
        self.printf_slots = 0                      # 8-byte slots of the printf argument buffer
        self.uses_dynamic_shared = fn.dynamic_shared
        self.edge_blocks: list[str] = []
        self.n_labels = len(fn.blocks)

    # ---- helpers for lowerings ---------------------------------------------------------------
    def i(self, text: str) -> None:
        """Append one instruction (without the trailing ';')."""
        self.out.append(f"\t{text};")

    def new_reg(self, prefix: str) -> str:
        n = self.counts[prefix] + 1
        self.counts[prefix] = n
        return f"{prefix}{n}"

    def tmp(self, t) -> str:
        prefix = tb.reg_prefix(t)         # pointers: %r for shared memory, else %rd
        n = self.counts[prefix] + 1
        self.counts[prefix] = n
        return f"{prefix}{n}"

    def reg(self, v) -> str:
        """The register holding `v` (a constant is moved into a fresh one)."""
        if v.__class__ is Const:
            r = self.tmp(v.type)
            self.out.append(f"\tmov.{tb.REG_CLASSES[tb.reg_prefix(v.type)][1]} {r}, "
                            f"{immediate(v.type, v.value)};")
            return r
        r = self.regs.get(v)
        if r is None:
            r = self.regs[v] = self.tmp(v.type)
        return r

    dst = reg          # the result register of an instruction (allocated on first sight)

    def src(self, v) -> str:
        """An operand: an immediate where PTX takes one (ints, f32, f64), else a register."""
        if isinstance(v, Const):
            t = v.type
            if isinstance(t, PtrType) or not (t.is_bool or t.bits == 16 and t.is_float):
                return immediate(t, v.value)
        return self.reg(v)

    def srcs(self, operands) -> list[str]:
        """Operands of an arithmetic instruction; not all of them may be immediates."""
        for v in operands:
            if v.__class__ is not Const:
                if len(operands) == 2:
                    return [self.src(operands[0]), self.src(operands[1])]
                return [self.src(v) for v in operands]
        return [self.reg(operands[0])] + [self.src(v) for v in operands[1:]]

    def need(self, feature: str, what: Instr | None = None) -> None:
        isa, sm = tb.FEATURES[feature]
        if isinstance(sm, str):             # arch-specific: exactly that arch has it
            if self.arch != sm:
                err = self.error(f"{feature} is an arch-specific feature of {sm} (compiling "
                                 f"for {self.arch}); compile with arch='{sm}' (its PTX runs "
                                 f"only on that GPU family)", what)
                err.needs_arch = sm         # a launch may retry with it (runtime/launch.py)
                raise err
        elif sm > self.sm:
            err = self.error(f"{feature} needs sm_{sm} or newer (compiling for {self.arch}); "
                             f"compile with arch='sm_{sm}' or newer", what)
            err.needs_arch = f"sm_{sm}"
            raise err
        if isa > self.isa:
            self.isa = isa

    def error(self, msg: str, what: Instr | None = None) -> CompileError:
        line = what.loc[0] if what is not None and what.loc else None
        return CompileError(msg, self.fn.attrs.get("source_file"), line,
                            what.loc[1] if line else None)

    def symbol(self, name: str) -> str:
        if name == "__dynamic_shared":
            self.uses_dynamic_shared = True
            return name
        return self.symbols[name]

    # ---- the function --------------------------------------------------------------------------
    def run(self) -> None:
        fn = self.fn
        self.param_names = [self.namer(p.name) for p in fn.params]   # the public names first
        for decl in (*fn.shared, *fn.locals, *fn.consts):
            self.symbols[decl.name] = self.namer(decl.name)
        self._load_params()
        targets = {id(b) for blk in fn.blocks for b in blk.successors}
        self.labels = {id(b): f"$L__BB{k}" for k, b in enumerate(fn.blocks)}
        source_lines = fn.attrs.get("source_lines") or {}
        cur_line = None
        lowerings = LOWERINGS
        out = self.out
        blocks = fn.blocks
        for k, block in enumerate(blocks):
            if k and id(block) in targets:
                out.append(f"{self.labels[id(block)]}:")
            nxt = blocks[k + 1] if k + 1 < len(blocks) else None
            for ins in block.instrs:
                if self.line_comments and ins.loc and ins.loc[0] != cur_line:
                    cur_line = ins.loc[0]
                    text = source_lines.get(cur_line) or source_lines.get(str(cur_line)) or ""
                    out.append(f"\t// line {cur_line}: {ascii_text(text.strip())}")
                op = ins.op
                if op == "br" or op == "cbr":
                    self._branch(ins, nxt)
                elif op == "ret":
                    self.i("ret")
                else:
                    lower = lowerings.get(op)
                    if lower is None:
                        raise self.error(f"the PTX backend has no lowering for IR op '{op}' "
                                         f"(a pyptx bug); please report it", ins)
                    lower(self, ins)
        out.extend(self.edge_blocks)

    def _load_params(self) -> None:
        for p, name in zip(self.fn.params, self.param_names):
            t = p.type
            if isinstance(t, PtrType) and t.space == "param":     # a tensor map (lower_tma)
                if self.sm < 90:
                    err = CompileError(f"the tensor map parameter '{p.name}' (pyptx.tensormap) "
                                       f"needs sm_90 or newer (compiling for {self.arch}); "
                                       f"compile with arch='sm_90' or newer",
                                       self.fn.attrs.get("source_file"),
                                       self.fn.attrs.get("first_line"))
                    err.needs_arch = "sm_90"
                    raise err
                self.need("cp.async.bulk.tensor")     # ISA 8.0 (cvta.param needs 7.7)
                raw = self.new_reg("%rd")
                self.i(f"mov.u64 {raw}, {name}")
                self.i(f"cvta.param.u64 {self.reg(p)}, {raw}")
            elif isinstance(t, PtrType):
                raw = self.new_reg("%rd")
                self.i(f"ld.param.u64 {raw}, [{name}]")
                self.i(f"cvta.to.global.u64 {self.reg(p)}, {raw}")
            elif t.is_bool:
                raw = self.new_reg("%rs")
                self.i(f"ld.param.u8 {raw}, [{name}]")
                self.i(f"setp.ne.u16 {self.reg(p)}, {raw}, 0")
            else:
                self.i(f"ld.param.{tb.suffixes(t).param} {self.reg(p)}, [{name}]")

    # ---- control flow ------------------------------------------------------------------------
    def _copies(self, target, values) -> list[str]:
        """The moves that pass `values` into `target`'s block arguments (sequentialised)."""
        if not target.args:
            return []
        pairs = []
        for arg, v in zip(target.args, values):
            src = immediate(v.type, v.value) if isinstance(v, Const) else self.reg(v)
            d = self.reg(arg)
            pairs.append((d, src, tb.REG_CLASSES[tb.reg_prefix(arg.type)][1]))
        seq = sequentialize(pairs, lambda d: self.new_reg(d.rstrip("0123456789")))
        return [f"\tmov.{m} {d}, {s};" for d, s, m in seq]

    def _goto(self, target, values, nxt) -> None:
        self.out.extend(self._copies(target, values))
        if target is not nxt:
            self.i(f"bra {self.labels[id(target)]}")

    def _branch(self, ins: Instr, nxt) -> None:
        if ins.op == "br":
            target, values = ins.succs[0]
            self._goto(target, values, nxt)
            return
        cond = ins.operands[0]
        (t_blk, t_vals), (f_blk, f_vals) = ins.succs
        if isinstance(cond, Const):
            blk, vals = (t_blk, t_vals) if cond.value else (f_blk, f_vals)
            self._goto(blk, vals, nxt)
            return
        p = self.reg(cond)
        t_copies = self._copies(t_blk, t_vals)
        f_copies = self._copies(f_blk, f_vals)
        if t_blk is nxt and f_blk is not nxt:
            # fall into the true side; leave on !p
            jump_guard, jump_blk, jump_copies = f"@!{p}", f_blk, f_copies
            stay_blk, stay_copies = t_blk, t_copies
        else:
            jump_guard, jump_blk, jump_copies = f"@{p}", t_blk, t_copies
            stay_blk, stay_copies = f_blk, f_copies
        if jump_copies:
            # critical edge: the jumping side's copies get an edge block of their own
            label = f"$L__BB{self.n_labels}"
            self.n_labels += 1
            self.edge_blocks.append(f"{label}:")
            self.edge_blocks.extend(jump_copies)
            self.edge_blocks.append(f"\tbra {self.labels[id(jump_blk)]};")
        else:
            label = self.labels[id(jump_blk)]
        self.i(f"{jump_guard} bra {label}")
        self.out.extend(stay_copies)
        if stay_blk is not nxt:
            self.i(f"bra {self.labels[id(stay_blk)]}")

    # ---- module text -------------------------------------------------------------------------
    def module_text(self) -> str:
        fn = self.fn
        head = ["//", "// Generated by pyptx (IR -> PTX backend)", "//", "",
                f".version {tb.format_version(self.isa)}", f".target {self.arch}",
                ".address_size 64", ""]
        if self.strings:
            head.append(".extern .func (.param .b32 func_retval0) vprintf (.param .b64 "
                        "vprintf_param_0, .param .b64 vprintf_param_1);")
            for n, data in enumerate(self.strings):
                head.append(f".global .align 1 .b8 $str{n}[{len(data)}] = "
                            f"{{{', '.join(map(str, data))}}};")
        for d in fn.consts:          # read-only tables with their data (pyptx.const_array)
            head.append(f".const .align {max(d.align, d.elem.mem_bytes)} .b8 "
                        f"{self.symbols[d.name]}[{len(d.data)}] = "
                        f"{{{', '.join(map(str, d.data))}}};")
        if self.uses_dynamic_shared:
            head.append(".extern .shared .align 16 .b8 __dynamic_shared[];")
        if head[-1]:
            head.append("")
        params = [f"\t.param {param_decl(p.type)} {name}{TENSOR_MAP_DIMS if _is_tmap(p.type) else ''}"
                  for p, name in zip(fn.params, self.param_names)]
        head.append(f".visible .entry {self.entry_name}(")
        head.append(",\n".join(params))
        head.append(")")
        head.extend(_entry_directives(fn))
        head.append("{")
        for prefix, (decl, _) in tb.REG_CLASSES.items():
            n = self.counts[prefix]
            if n:
                head.append(f"\t.reg {decl} {prefix}<{n + 1}>;")
        for space, decls in (("shared", fn.shared), ("local", fn.locals)):
            for d in decls:
                size = max(d.count * d.elem.mem_bytes, 1)
                align = max(d.align, d.elem.mem_bytes)
                head.append(f"\t.{space} .align {align} .b8 {self.symbols[d.name]}[{size}];")
        if self.printf_slots:
            head.append(f"\t.local .align 8 .b8 __pyptx_printf_buf[{8 * self.printf_slots}];")
        head.append("")
        head.extend(self.out)
        head.append("}")
        head.append("")
        return "\n".join(head)


def _entry_directives(fn) -> list[str]:
    """`.maxntid` / `.minnctapersm` from `pyptx.launch_bounds` (fn.attrs['launch_bounds']):
    with them ptxas knows the register count a thread has at entry, which `setmaxnreg` needs
    (without it ptxas ignores every setmaxnreg, warning C7508)."""
    bounds = fn.attrs.get("launch_bounds")
    if not bounds:
        return []
    threads, blocks = bounds
    out = [f".maxntid {threads}, 1, 1"]
    if blocks:
        out.append(f".minnctapersm {blocks}")
    return out
