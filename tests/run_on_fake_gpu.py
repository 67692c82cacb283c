"""Run a script with pyptx's GPU path on the fake driver: `python tests/run_on_fake_gpu.py
examples/saxpy.py [args...]`.

Installs `tests/fake_driver.FakeDriver` (with the stream capture of `tests/fake_graph.py`) as
the CUDA driver and sets PYPTX_DEVICE=gpu, then runs the script as `__main__` (runpy).  Kernels
run on the CPU executor behind the fake, so the script's own result checks apply.
"""
from __future__ import annotations

import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv) -> None:
    if not argv:
        raise SystemExit("usage: python tests/run_on_fake_gpu.py SCRIPT [ARGS...]")
    sys.path.insert(0, HERE)
    os.environ["PYPTX_DEVICE"] = "gpu"
    from fake_graph import GraphFakeDriver
    from pyptx.runtime import driver, streams
    driver.set_driver(GraphFakeDriver())
    script = argv[0]
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))    # as `python SCRIPT` would
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:         # sys.exit(main()): a failure stands; success still syncs
        if e.code not in (None, 0):
            raise
    streams.synchronize()            # a fault in work still queued fails the run, too


if __name__ == "__main__":
    main(sys.argv[1:])
