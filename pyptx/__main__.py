"""`python -m pyptx compile | check | info` — the command line."""
from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import os
import re
import sys


class _TargetError(Exception):
    """A TARGET that names nothing importable: reported argparse-style (exit 2)."""


def _package_module_name(path: str):
    """'pkg/sub/mod.py' inside a regular package (its directory has an __init__.py) ->
    ('pkg.sub.mod', the directory above 'pkg'): imported as a module, so its relative imports
    work.  None for a file outside any package (loaded by its path: any file name works)."""
    directory, base = os.path.split(os.path.abspath(path))
    parts = [] if base == "__init__.py" else [os.path.splitext(base)[0]]
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory, pkg = os.path.split(directory)
        parts.insert(0, pkg)
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts), directory


def _import_module(name: str, root: str | None = None):
    if root is not None:                        # the file's own package comes first
        sys.path.insert(0, root)
    if os.curdir not in sys.path and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())         # `python -m` has it; keep it for main(argv) too
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        # the module itself (or a package above it) is missing: the user's TARGET is wrong;
        # a missing import inside their module is their module's error, shown as is
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise _TargetError(f"no module named {e.name!r} (TARGET is MODULE:NAME with MODULE "
                               f"importable from {os.getcwd()}, or FILE.py:NAME)") from None
        raise


def _load_target(spec: str):
    """'path/to/file.py:NAME' or 'package.module:NAME' -> the object NAME (a dotted NAME
    reaches attributes: 'mod:Class.kernel')."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise _TargetError(f"expected FILE.py:NAME or MODULE:NAME, got {spec!r}")
    is_file = where.endswith(".py") or os.sep in where or (os.altsep or os.sep) in where
    if is_file:
        if not os.path.isfile(where):
            raise _TargetError(f"no such file: {where}")
        dotted = _package_module_name(where)
        if dotted is not None:                  # inside a package: relative imports work
            module = _import_module(*dotted)
            found = getattr(module, "__file__", None)
            if not found or not os.path.samefile(found, where):
                raise _TargetError(f"{where} is module {dotted[0]}, but that name imports "
                                   f"{found or 'something else'}; name the module instead "
                                   f"(MODULE:NAME)")
        else:
            mod_name = "_pyptx_cli_" + re.sub(r"\W", "_",
                                              os.path.splitext(os.path.basename(where))[0])
            spec_ = importlib.util.spec_from_file_location(mod_name, where)
            module = importlib.util.module_from_spec(spec_)
            sys.modules[mod_name] = module
            sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
            spec_.loader.exec_module(module)
    else:
        if not all(p.isidentifier() for p in where.split(".")):
            raise _TargetError(f"{where!r} is neither a FILE.py nor a MODULE name")
        module = _import_module(where)
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise _TargetError(f"{where} defines no {name!r}")
        obj = getattr(obj, part)
    return obj


def _parse_define(text: str):
    """`-D NAME=VALUE` / `--constexpr NAME=VALUE` (argparse type: errors exit 2 with usage)."""
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        v = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        v = {"true": True, "false": False}.get(value.lower(), None)
        if v is None:
            raise argparse.ArgumentTypeError(f"{name}: {value!r} is not an int, float or bool") \
                from None
    if not isinstance(v, (bool, int, float)):
        raise argparse.ArgumentTypeError(f"{name}: {value!r} is not an int, float or bool")
    return name, v


def _parse_arch(text: str) -> str:
    """`--arch` checked by the compiler's own rule, so a bad one is a usage error."""
    from .compiler import check_arch
    from .errors import CompileError
    try:
        return check_arch(text)
    except CompileError as e:
        raise argparse.ArgumentTypeError(e.msg) from None


def _parse_signature(text: str):
    """`--signature`: Numba's "void(float32[:], int32)" (pyptx.cuda's parser) or pyptx's own
    "f32[:], i32" (passed to pyptx.compile as it is)."""
    from .cuda import parse_signature
    if "(" in text:
        try:
            args, ret = parse_signature(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if ret is not None:
            raise argparse.ArgumentTypeError(f"a kernel returns nothing: write "
                                             f"\"void(...)\", got {text!r}")
        return args
    try:                                # "float32[:], int32": Numba's names without void(...)
        return parse_signature(f"({text})")[0]
    except ValueError:
        return text                     # pyptx's names; pyptx.compile reports a bad one


def cmd_compile(args) -> int:
    import pyptx
    try:
        target = _load_target(args.target)
    except _TargetError as e:
        args.parser.error(str(e))
    if not isinstance(target, (pyptx.Kernel, pyptx.DeviceFunction)) and \
            not inspect.isfunction(target):
        args.parser.error(f"{args.target} is a {type(target).__name__}, not a kernel or a "
                          f"function")
    constexprs = dict(args.define)
    try:
        ck = pyptx.compile(target, arch=args.arch, constexprs=constexprs or None,
                           signature=args.signature)
    except pyptx.PyptxError as e:
        msg = str(e)
        if args.signature is None and "signature=" in getattr(e, "msg", ""):
            msg += ('\n(on the command line: --signature "void(float32[:], int32, ...)", one '
                    'type per parameter)')
        print(msg, file=sys.stderr)
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
    c = sub.add_parser("compile", help="compile a kernel to PTX",
                       description="Compile the kernel TARGET to PTX (or its IR with --ir).")
    c.add_argument("target", metavar="TARGET",
                   help="FILE.py:NAME or MODULE:NAME (e.g. stdlib_kernels.softmax:"
                        "softmax_warp_kernel)")
    c.add_argument("--arch", default=None, type=_parse_arch,
                   help="sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a or newer (default: the "
                        "GPU's, else sm_80)")
    c.add_argument("-D", "--constexpr", dest="define", action="append", default=[],
                   type=_parse_define, metavar="NAME=VALUE", help="a constexpr value (repeatable)")
    c.add_argument("--signature", default=None, type=_parse_signature, metavar="SIG",
                   help="argument types of an unannotated kernel: Numba's \"void(float32[:], "
                        "int32)\" or pyptx's \"f32[:], i32\"")
    c.add_argument("--ir", action="store_true", help="print the optimised IR instead of PTX")
    c.add_argument("-o", dest="output", default=None, metavar="OUT", help="write to a file")
    c.set_defaults(fn=cmd_compile, parser=c)
    k = sub.add_parser("check", help="assemble FILE.ptx with ptxas and report resources")
    k.add_argument("file", metavar="FILE.ptx")
    k.add_argument("--arch", default=None, type=_parse_arch)
    k.set_defaults(fn=cmd_check)
    i = sub.add_parser("info", help="GPU, compute capability and chosen arch (or the CPU executor)")
    i.set_defaults(fn=cmd_info)
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
