"""The opcode table: every IR operation, its operands, its attributes and what it means.

This table is the contract between the frontend (which produces these ops), the passes (which
fold/move them: `pure` says whether that is allowed) and the PTX backend (which has one template
or lowering per op).  Semantics are exact: the backend must emit PTX meaning precisely this, and
the CPU executor then reproduces it.

Notation: T is the instruction's result type, operands are listed in order.  "int" covers signed
and unsigned, bool is the 1-bit predicate type `bool_`.  Unless stated otherwise operands have
type T.  Sub-32-bit integers wrap at their own width after every op (i8 add wraps at 8 bits).

Attributes (in `Instr.attrs`) are listed per op; values are plain str/int/float/bool.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpInfo:
    name: str
    operands: str          # informal operand list, for docs and the verifier's arity check
    nargs: int | None      # exact operand count, None = variadic
    pure: bool             # no side effects, result depends only on operands -> CSE/DCE/LICM ok
    result: bool           # produces a value
    doc: str


def _t(rows):
    return {r.name: r for r in rows}


OPS: dict[str, OpInfo] = _t([
    # ---- arithmetic (T int or float; f16 arithmetic is real f16, correctly rounded) -----------
    OpInfo("add", "a, b", 2, True, True, "a + b (float: IEEE round-to-nearest; int: wraps)"),
    OpInfo("sub", "a, b", 2, True, True, "a - b"),
    OpInfo("mul", "a, b", 2, True, True, "a * b (float: .rn; int: low bits, wraps)"),
    OpInfo("div", "a, b", 2, True, True,
           "float: IEEE a / b (.rn); f32 with attribute `full` (fastmath): `div.full.f32`, "
           "within 2 ulp.  int: C truncating division; b == 0 or (MIN / -1) give an "
           "unspecified value - the frontend guards those to implement Python `//`."),
    OpInfo("rem", "a, b", 2, True, True, "int only: C remainder (sign of a); b == 0 unspecified"),
    OpInfo("floordiv", "a, b", 2, True, True,
           "int only: Python/numpy floor division a // b, total: a // 0 == 0, MIN // -1 == MIN.  "
           "The frontend's `//`; passes/strength.py expands it (shifts for powers of two)"),
    OpInfo("floormod", "a, b", 2, True, True,
           "int only: Python/numpy a % b (sign of b), total: a % 0 == 0.  The frontend's `%`; "
           "expanded by passes/strength.py before the backend"),
    OpInfo("neg", "a", 1, True, True, "-a (int wraps)"),
    OpInfo("abs", "a", 1, True, True, "|a| (int: MIN stays MIN)"),
    OpInfo("min", "a, b", 2, True, True, "min; float: if one operand is NaN the other is returned"),
    OpInfo("max", "a, b", 2, True, True, "max; float NaN rule as min"),
    OpInfo("fma", "a, b, c", 3, True, True, "float only: a * b + c with a single rounding (.rn)"),
    OpInfo("mulhi", "a, b", 2, True, True, "int 32/64 only: high half of the full product"),
    OpInfo("mulwide", "a, b", 2, True, True,
           "a, b are i32 (or u32); T is i64 (u64): the exact 64-bit product"),
    # ---- bitwise (T int or bool) --------------------------------------------------------------
    OpInfo("and", "a, b", 2, True, True, "a & b"),
    OpInfo("or", "a, b", 2, True, True, "a | b"),
    OpInfo("xor", "a, b", 2, True, True, "a ^ b"),
    OpInfo("not", "a", 1, True, True, "~a (bool: logical not)"),
    OpInfo("shl", "a, n", 2, True, True,
           "a << n; n is u32; n >= bits(T) gives 0"),
    OpInfo("shr", "a, n", 2, True, True,
           "a >> n; n is u32; arithmetic for signed T, logical for unsigned; n >= bits(T) gives "
           "0 or -1 (sign fill)"),
    OpInfo("popc", "a", 1, True, True, "a: int 32/64; T = i32: number of set bits"),
    OpInfo("clz", "a", 1, True, True, "a: int 32/64; T = i32: leading zero bits"),
    OpInfo("brev", "a", 1, True, True, "a: int 32/64; T = type of a: bits reversed"),
    OpInfo("dp4a", "a, b, c", 3, True, True,
           "T i32 or u32 (= type of c); a, b i32/u32: c + dot of the four bytes of a and b, each "
           "byte signed or unsigned per the operand's type (PTX dp4a)"),
    # ---- floating-point functions (T float; f16 operands are computed in f32 by the frontend) --
    OpInfo("sqrt", "a", 1, True, True, "correctly rounded square root (.rn)"),
    OpInfo("rcp", "a", 1, True, True, "correctly rounded 1/a (.rn)"),
    OpInfo("floor", "a", 1, True, True, "round toward -inf to an integral float"),
    OpInfo("ceil", "a", 1, True, True, "round toward +inf to an integral float"),
    OpInfo("trunc", "a", 1, True, True, "round toward 0 to an integral float"),
    OpInfo("rint", "a", 1, True, True, "round to nearest even to an integral float"),
    OpInfo("approx", "a", 1, True, True,
           "attrs fn in {'ex2','lg2','sin','cos','tanh','rsqrt','rcp','sqrt'}: the PTX "
           "`<fn>.approx.f32` instruction (T f32), with its PTX-ISA error bound.  Only the math "
           "library's implementations and `fast_*` names use it."),
    # ---- comparison and selection --------------------------------------------------------------
    OpInfo("cmp", "a, b", 2, True, True,
           "T bool_.  attrs pred in {'eq','ne','lt','le','gt','ge'}.  Floats: every predicate is "
           "false when an operand is NaN except 'ne', which is true (Python semantics)."),
    OpInfo("select", "c, a, b", 3, True, True, "c is bool_: a if c else b (both evaluated)"),
    OpInfo("isnan", "a", 1, True, True, "float a; T bool_"),
    # ---- conversions ----------------------------------------------------------------------------
    OpInfo("cvt", "a", 1, True, True,
           "convert a to T.  int->int: wrap/sign-extend like numpy astype.  float->int: round "
           "toward zero, saturate to T's range, NaN -> 0 (PTX cvt.rzi).  int->float and "
           "float->float: round to nearest even.  bool->number: 0/1.  number->bool: a != 0."),
    OpInfo("bitcast", "a", 1, True, True, "reinterpret the bits of a as T (same width)"),
    # ---- special registers ----------------------------------------------------------------------
    OpInfo("sreg", "", 0, True, True,
           "T i32. attrs name in {'tid.x','tid.y','tid.z','ntid.x',...,'ctaid.x',...,'nctaid.x',"
           "...,'laneid','warpid'}: PTX special register %<name>"),
    # ---- memory ---------------------------------------------------------------------------------
    OpInfo("addr", "", 0, True, True,
           "T ptr.<space><elem>: base address of a static shared/local/const MemDecl or of the "
           "dynamic shared memory.  attrs space in {'shared','local','const'}, symbol = MemDecl "
           "name, or "
           "symbol = '__dynamic_shared' for dynamic shared memory"),
    OpInfo("gep", "p, i", 2, True, True,
           "T = type of p: p + i * sizeof(elem).  i is i32 (sign-extended: the multiply is a "
           "widening one) or i64.  A negative i is allowed here (memcheck catches it)."),
    OpInfo("load", "p", 1, False, True,
           "T = elem of p: read memory at p + attrs.get('offset', 0) bytes"),
    OpInfo("store", "p, v", 2, False, False,
           "write v (type elem of p) at p + attrs.get('offset', 0) bytes"),
    OpInfo("atomic", "p, v[, w]", None, False, True,
           "atomic read-modify-write at p + attrs.get('offset', 0), returns the old value "
           "(T = elem of p).  attrs kind in "
           "{'add','min','max','exch','and','or','xor','cas','inc','dec'}; cas: operands p, "
           "expected, new; inc/dec (u32): PTX atom.inc/dec (wrap at v)"),
    OpInfo("vload", "p", 1, False, True,
           "T = VecType(elem of p, n), n in {1, 2, 4, 8}, n * sizeof(elem) <= 16: the n "
           "consecutive elements at p + attrs.get('offset', 0) bytes, read by one access; the "
           "address must be a multiple of n * sizeof(elem) (a misaligned one traps)"),
    OpInfo("vstore", "p, v0, ..., v(n-1)", None, False, False,
           "write the n values (type elem of p) as one access at p + attrs.get('offset', 0); "
           "n and alignment as vload"),
    OpInfo("lane", "v", 1, True, True,
           "v is a VecType value; T = its elem: lane attrs index (0-based) of v"),
    # ---- synchronisation and warp operations -----------------------------------------------------
    OpInfo("barrier", "", 0, False, False, "bar.sync 0 (syncthreads)"),
    OpInfo("syncwarp", "mask", 1, False, False, "bar.warp.sync mask (u32)"),
    OpInfo("fence", "", 0, False, False, "attrs scope in {'gl','cta','sys'}: membar"),
    OpInfo("shfl", "v, lane, mask", 3, False, True,
           "T = type of v (32- or 64-bit int/float).  attrs mode in {'bfly','down','up','idx'}; "
           "lane (u32/i32) is the lane mask/delta/source lane; mask (u32) the member mask.  "
           "Out-of-range source lanes return the thread's own v (PTX shfl.sync, c = 0x1f)."),
    OpInfo("activemask", "", 0, False, True,
           "T u32: the mask of the lanes of the warp executing this instruction together "
           "(PTX activemask.b32); not pure: it depends on where control flow has diverged"),
    OpInfo("vote", "p, mask", 2, False, True,
           "attrs mode in {'any','all','uni'} -> T bool_; mode 'ballot' -> T u32"),
    # ---- tensor cores and async copies (sm_80+; docs/tensor-cores.md has the layouts) ---------
    OpInfo("mma", "a0..a3, b0, b1, c0..c3", 10, False, True,
           "warp-collective PTX mma.sync.aligned.m16n8k16.row.col.f32.<atype>.<atype>.f32: a*, b* "
           "u32 (two packed f16/bf16 each), c* f32.  T VecType(f32, 4): D's four registers, read "
           "with `lane`.  attrs atype in {'f16','bf16'}"),
    OpInfo("ldmatrix", "p", 1, False, True,
           "warp-collective PTX ldmatrix.sync.aligned.m8n8.x<count>[.trans].shared.b16: p is a "
           "ptr.shared (this lane's row address, plus attrs.get('offset', 0) bytes).  "
           "T VecType(u32, count), read with `lane`.  "
           "attrs count in {1,2,4}, trans (bool)"),
    OpInfo("pack2", "lo, hi", 2, True, True,
           "T u32: f32 lo and hi rounded to nearest-even f16/bf16 (attrs dtype), lo in bits "
           "0..15 (PTX cvt.rn.{f16x2,bf16x2}.f32 d, hi, lo on sm_80+).  Pure (CSE, DCE and LICM "
           "treat it like any value) but never constant-folded (passes/evaluate.py)"),
    OpInfo("cp_async", "dst, src[, src_bytes]", None, False, False,
           "PTX cp.async: copy attrs nbytes (4, 8, 16) from src (ptr.global, plus attrs "
           "src_offset bytes) to dst (ptr.shared, plus attrs offset bytes), asynchronously: the "
           "copy belongs to the next committed group.  With src_bytes (u32, 0..nbytes) only that "
           "many bytes are read and the rest of dst is written as zeros"),
    OpInfo("cp_async_wait", "", 0, False, False,
           "PTX cp.async.commit_group then cp.async.wait_group attrs n: commit this thread's "
           "copies issued since the last commit as one group, then wait until at most n groups "
           "are pending"),
    OpInfo("match", "v, mask", 2, False, True,
           "T u32; v a 32/64-bit int or float (compared as bits).  attrs mode 'any': the lanes "
           "of mask holding the same value (PTX match.any.sync); 'all': mask if every lane of "
           "mask holds the same value, else 0 (match.all.sync)"),
    OpInfo("barrier_red", "p", 1, False, True,
           "bar.red 0 over the whole block with the bool_ p.  attrs mode 'popc' -> T i32 (how "
           "many threads' p is true), 'and' / 'or' -> T bool_"),
    OpInfo("bfind", "a", 1, True, True,
           "a: int 32/64; T u32: the bit position of the most significant non-sign bit (attrs "
           "shiftamt: its distance from the top instead); 0xFFFFFFFF when there is none (PTX bfind)"),
    # ---- run-time checks ---------------------------------------------------------------------------
    OpInfo("trap_if", "p", 1, False, False,
           "when the bool_ p is true, end the launch (PTX `@p trap`; a GPU reports a sticky "
           "launch failure, the CPU executor a MemoryFault naming the thread and line).  attrs "
           "why (str, ASCII): what went wrong, for the executor's message.  A constant false p "
           "is removed by constant folding, so a check on an index known at compile time "
           "costs nothing"),
    # ---- output -----------------------------------------------------------------------------------
    OpInfo("print", "values...", None, False, False,
           "vprintf(attrs fmt, values...): fmt is a C format string with one conversion per "
           "value (%d %u %ld %lu %f %s-free); f32/f16 values are passed as f64, sub-32-bit ints "
           "as i32, as C varargs promotion does"),
    # ---- terminators ------------------------------------------------------------------------------
    OpInfo("br", "", 0, False, False, "jump to succs[0] passing its block arguments"),
    OpInfo("cbr", "c", 1, False, False, "c is bool_: succs[0] if c else succs[1]"),
    OpInfo("ret", "", 0, False, False, "end of this thread"),
])

CMP_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
ATOMIC_KINDS = ("add", "min", "max", "exch", "and", "or", "xor", "cas", "inc", "dec")
SHFL_MODES = ("bfly", "down", "up", "idx")
APPROX_FNS = ("ex2", "lg2", "sin", "cos", "tanh", "rsqrt", "rcp", "sqrt")
SREGS = tuple(f"{r}.{d}" for r in ("tid", "ntid", "ctaid", "nctaid") for d in "xyz") + (
    "laneid", "warpid", "lanemask_lt", "lanemask_le", "lanemask_eq", "lanemask_gt", "lanemask_ge")
VECTOR_LANES = (1, 2, 4, 8)
#: op -> (operand index, attrs key) of each address it takes: the access is at that pointer plus
#: attrs.get(key, 0) bytes (address folding fills them, the backend prints `[%r+key]`)
ADDRESS_OFFSETS = {
    "load": ((0, "offset"),), "store": ((0, "offset"),), "vload": ((0, "offset"),),
    "vstore": ((0, "offset"),), "atomic": ((0, "offset"),), "ldmatrix": ((0, "offset"),),
    "cp_async": ((0, "offset"), (1, "src_offset")),
}
