"""Property: every pass (and the whole pipeline) keeps the observable behaviour of random
programs, as run by the reference interpreter tests/ir_interp.py."""
import copy

import pytest
from hypothesis import HealthCheck, given, settings

from pyptx.ir import parse_function, print_function, verify
from pyptx.passes import (addressing, constfold, cse, dce, licm, run_pipeline, simplifycfg,
                          strength, unroll)

from ir_interp import run_function
from ir_strategies import programs

SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _clone(fn):
    return parse_function(print_function(fn))


def _check(pass_fn, prog):
    fn, params, memory = prog
    verify(fn)
    before = run_function(fn, params, memory)
    work = _clone(fn)
    pass_fn(work)
    verify(work)
    after = run_function(work, params, memory)
    if before[0] == "trap":
        return
    assert after[0] == before[0]


PASSES = {"constfold": constfold.run, "dce": dce.run, "simplifycfg": simplifycfg.run,
          "cse": cse.run, "licm": licm.run, "addressing": addressing.run,
          "strength": strength.run, "unroll": unroll.run, "O0": lambda f: run_pipeline(f, 0, False),
          "O1": lambda f: run_pipeline(f, 1, False), "O2": lambda f: run_pipeline(f, 2, False)}


@pytest.mark.parametrize("name", sorted(PASSES))
@SETTINGS
@given(prog=programs())
def test_pass_preserves_semantics(name, prog):
    _check(PASSES[name], prog)


@SETTINGS
@given(prog=programs(loops=False))
def test_pipeline_straight_line(prog):
    _check(lambda f: run_pipeline(f, 2, False), prog)


@SETTINGS
@given(prog=programs())
def test_pipeline_is_idempotent_and_round_trips(prog):
    fn = prog[0]
    run_pipeline(fn, 2, True)
    verify(fn)
    text = print_function(fn)
    assert print_function(parse_function(text)) == text
