"""`python -m pyptx compile | check | info` — the command line."""
from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import sys


def _load_target(spec: str):
    """'path/to/file.py:NAME' -> the object NAME defined in that file."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise SystemExit(f"pyptx: expected FILE.py:NAME, got {spec!r}")
    if not os.path.isfile(path):
        raise SystemExit(f"pyptx: no such file: {path}")
    mod_name = "_pyptx_cli_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    spec_ = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec_)
    sys.modules[mod_name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec_.loader.exec_module(module)
    if not hasattr(module, name):
        raise SystemExit(f"pyptx: {path} defines no {name!r}")
    return getattr(module, name)


def _parse_define(text: str):
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise SystemExit(f"pyptx: -D expects NAME=VALUE, got {text!r}")
    try:
        v = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        v = {"true": True, "false": False}.get(value.lower(), None)
        if v is None:
            raise SystemExit(f"pyptx: -D {name}: {value!r} is not an int, float or bool") from None
    if not isinstance(v, (bool, int, float)):
        raise SystemExit(f"pyptx: -D {name}: {value!r} is not an int, float or bool")
    return name, v


def cmd_compile(args) -> int:
    import pyptx
    target = _load_target(args.target)
    constexprs = dict(_parse_define(d) for d in args.define)
    try:
        ck = pyptx.compile(target, arch=args.arch, constexprs=constexprs or None)
    except pyptx.PyptxError as e:
        print(str(e), file=sys.stderr)
        return 1
    text = ck.ir if args.ir else ck.ptx
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_check(args) -> int:
    from .errors import ToolchainError
    from .toolchain import _ptxas, resources
    try:
        with open(args.file, encoding="utf-8") as f:
            ptx = f.read()
    except OSError as e:
        raise SystemExit(f"pyptx: cannot read {args.file}: {e.strerror or e}") from None
    arch = args.arch
    if arch is None:
        m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
        arch = m.group(1) if m else "sm_80"
    try:
        _ptxas()                            # no ptxas at all is not a rejection of the file
    except ToolchainError as e:
        print(f"pyptx check: {e}", file=sys.stderr)
        return 1
    try:
        res = resources(ptx, arch)          # one `ptxas -v` run: validation and the report
    except ToolchainError as e:
        print(f"{args.file}: ptxas rejected it for {arch}:\n{e}", file=sys.stderr)
        return 1
    print(f"{args.file}: OK for {arch}")
    for k in ("registers", "spill_stores", "spill_loads", "shared_bytes", "local_bytes"):
        print(f"  {k:13s} {res.get(k)}")
    return 0


def cmd_info(args) -> int:
    from .runtime.profile import describe
    print(describe())
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyptx", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile FILE.py:NAME to PTX")
    c.add_argument("target", metavar="FILE.py:NAME")
    c.add_argument("--arch", default=None, help="sm_75 .. sm_90a (default: the GPU's, else sm_80)")
    c.add_argument("-D", dest="define", action="append", default=[], metavar="NAME=VALUE",
                   help="a constexpr value")
    c.add_argument("--ir", action="store_true", help="print the optimised IR instead of PTX")
    c.add_argument("-o", dest="output", default=None, metavar="OUT", help="write to a file")
    c.set_defaults(fn=cmd_compile)
    k = sub.add_parser("check", help="assemble FILE.ptx with ptxas and report resources")
    k.add_argument("file", metavar="FILE.ptx")
    k.add_argument("--arch", default=None)
    k.set_defaults(fn=cmd_check)
    i = sub.add_parser("info", help="GPU, compute capability and chosen arch (or the CPU executor)")
    i.set_defaults(fn=cmd_info)
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
