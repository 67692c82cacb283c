"""The verifier: a valid function passes; each rule has an example that fails it."""
import pytest

from pyptx import types as T
from pyptx.ir import Const, Instr, IRError, parse_function, verify

BASE = """kernel @k(%x: ptr.global<f32>, %n: i32)
    shared @tile: f32[64] align 16
{
^entry:
  %0 = sreg {name = "tid.x"} : i32
  %1 = cmp %0, %n {pred = "lt"} : bool_
  cbr %1, ^body(%0), ^exit
^body(%i.2: i32):
  %3 = gep %x, %i.2 : ptr.global<f32>
  %4 = load %3 : f32
  %5 = addr {space = "shared", symbol = "tile"} : ptr.shared<f32>
  store %5, %4
  br ^exit
^exit:
  ret
}
"""


def test_base_is_valid():
    verify(parse_function(BASE))


def _fn():
    return parse_function(BASE)


def _block(fn, name):
    return next(b for b in fn.blocks if b.name == name)


def _breaks(mutate, match):
    fn = _fn()
    mutate(fn)
    with pytest.raises(IRError, match=match):
        verify(fn)


def test_missing_terminator():
    _breaks(lambda f: _block(f, "exit").instrs.pop(), "empty block")
    _breaks(lambda f: _block(f, "body").instrs.pop(), "missing terminator")


def test_terminator_in_the_middle():
    def m(f):
        b = _block(f, "body")
        ret = Instr("ret", [])
        ret.block = b
        b.instrs.insert(0, ret)
    _breaks(m, "terminator in the middle")


def test_branch_arg_count_and_type():
    _breaks(lambda f: f.entry.instrs[-1].succs[0][1].clear(), "takes 1 arguments")
    _breaks(lambda f: f.entry.instrs[-1].succs[0][1].__setitem__(0, Const(T.i64, 1)),
            "does not match")


def test_operand_count():
    _breaks(lambda f: f.entry.instrs[1].operands.pop(), "expects 2 operands")


def test_binary_types_must_match():
    _breaks(lambda f: f.entry.instrs[1].operands.__setitem__(1, Const(T.i64, 1)),
            "equal operand types")
    fn = parse_function("kernel @k(%a: i32, %b: f32)\n{\n^e:\n  %0 = add %a, %b : i32\n"
                        "  ret\n}\n")
    with pytest.raises(IRError, match="one int/float type"):
        verify(fn)


def test_cmp_result_is_bool_and_select_cond_is_bool():
    _breaks(lambda f: setattr(f.entry.instrs[1], "type", T.i32), "bool_ result")
    fn = parse_function("kernel @k(%a: i32)\n{\n^e:\n  %0 = select %a, %a, %a : i32\n"
                        "  ret\n}\n")
    with pytest.raises(IRError, match="bool_ condition"):
        verify(fn)


def test_gep_and_memory_types():
    _breaks(lambda f: _block(f, "body").instrs[0].operands.__setitem__(1, Const(T.u8, 1)),
            "i32/i64 index")
    _breaks(lambda f: setattr(_block(f, "body").instrs[1], "type", T.f64), "pointer's elem")
    _breaks(lambda f: _block(f, "body").instrs[3].operands.__setitem__(1, Const(T.i32, 1)),
            "value type must be")


def test_use_not_dominated():
    def m(f):
        # use the body's load in the exit block, which ^entry reaches without ^body
        load = _block(f, "body").instrs[1]
        ex = _block(f, "exit")
        p = Instr("print", [load], None, {"fmt": "%f"})
        p.block = ex
        ex.instrs.insert(0, p)
    _breaks(m, "not dominated")


def test_use_before_definition_in_block():
    def m(f):
        ins = f.entry.instrs
        ins[0], ins[1] = ins[1], ins[0]
    _breaks(m, "before its definition")


def test_unknown_block_and_unknown_symbol():
    from pyptx.ir import Block
    _breaks(lambda f: f.entry.instrs[-1].succs.__setitem__(1, (Block("ghost"), [])),
            "unknown block")
    _breaks(lambda f: _block(f, "body").instrs[2].attrs.__setitem__("symbol", "nope"),
            "unknown shared symbol")
    _breaks(lambda f: _block(f, "body").instrs[2].attrs.__setitem__("symbol",
                                                                      "__dynamic_shared"),
            "dynamic_shared")


def test_entry_block_with_args():
    _breaks(lambda f: f.entry.add_arg(T.i32), "entry block has arguments")


def test_attribute_values_and_result_presence():
    _breaks(lambda f: f.entry.instrs[1].attrs.__setitem__("pred", "lo"), "cmp pred")
    _breaks(lambda f: f.entry.instrs[0].attrs.__setitem__("name", "clock"), "special register")
    _breaks(lambda f: setattr(_block(f, "body").instrs[3], "type", T.f32), "must not produce")
    _breaks(lambda f: setattr(f.entry.instrs[0], "op", "frobnicate"), "unknown opcode")


def test_instr_block_back_pointer():
    _breaks(lambda f: setattr(f.entry.instrs[0], "block", None), "instr.block")


def test_value_from_another_function():
    other = _fn()
    _breaks(lambda f: _block(f, "body").instrs[0].operands.__setitem__(0, other.params[0]),
            "another function")
    _breaks(lambda f: _block(f, "body").instrs[0].operands.__setitem__(
        1, _block(other, "body").args[0]), "not defined in this function")


def _insert_in_body(ins):
    """A mutation putting `ins` at the top of ^body (which has the f32 load %4 and tile)."""
    def m(f):
        b = _block(f, "body")
        ins.block = b
        b.instrs.insert(0, ins)
    return m


def test_tensor_core_ops_have_type_rules():
    """The five tensor-core ops are checked like every other op (their records' `check`)."""
    u, f = Const(T.u32, 0), Const(T.f32, 0.0)
    vec = T.VecType(T.f32, 4)
    _breaks(_insert_in_body(Instr("mma", [u] * 6 + [f] * 3 + [u], vec, {"atype": "f16"})),
            "mma: six u32")
    _breaks(_insert_in_body(Instr("mma", [u] * 6 + [f] * 4, vec, {"atype": "f32"})),
            "atype must be f16 or bf16")
    _breaks(_insert_in_body(Instr("mma", [u] * 6 + [f] * 4, vec, {"atype": "s8"})),
            "mma: six u32")                 # s8/u8 accumulate in i32: f32 C/D is an error
    _breaks(_insert_in_body(Instr("pack2", [f, u], T.u32, {"dtype": "f16"})), "pack2: two f32")
    _breaks(_insert_in_body(Instr("cp_async_wait", [], None, {"n": -1})), "non-negative")
    _breaks(_insert_in_body(Instr("cp_async", [u, u], None, {"nbytes": 16})), "shared dst")
    _breaks(_insert_in_body(Instr("ldmatrix", [u], T.VecType(T.u32, 4), {"count": 3})),
            "count 1, 2 or 4")
