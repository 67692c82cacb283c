"""docs/architecture.md's "saxpy through every stage" section is what the compiler produces now:
regenerating it (docs/gen_architecture.py) must give the committed text."""
from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _gen():
    spec = importlib.util.spec_from_file_location("gen_architecture",
                                                  ROOT / "docs" / "gen_architecture.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_architecture_saxpy_section_is_current():
    gen = _gen()
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert gen.BEGIN in doc and gen.END in doc
    assert gen.render(doc, gen.section()) == doc, \
        "docs/architecture.md is stale: run python docs/gen_architecture.py"


def test_the_section_shows_every_stage():
    before, after, ptx = _gen().stages()
    assert "mul %a" in before and "fma %a" not in before      # the frontend does not fuse
    assert "fma %a" in after                                   # the passes do
    assert ".visible .entry saxpy(" in ptx and "fma.rn.f32" in ptx
    assert str(ROOT) not in before + after + ptx               # no machine-specific paths
