"""Compiling llama.cpp's CUDA kernels from a local ggml / llama.cpp checkout for the static SASS
comparisons (bench_gguf, bench_attention_sass).

Nothing is downloaded: the caller names the checkout (`--ggml DIR` or $GGML_SRC).  nvcc and
cuobjdump come from the nvidia wheels (or PATH).  ggml's CUDA headers include cuBLAS for its types
only, so a stub `cublas_v2.h` is generated next to the source instead of needing cuBLAS.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess

#: just enough of cuBLAS's declarations for ggml's common.cuh to compile (no cuBLAS call is made)
CUBLAS_STUB = """#pragma once
#include <cuda_runtime.h>
#include <library_types.h>
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED, CUBLAS_STATUS_ALLOC_FAILED,
  CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_ARCH_MISMATCH, CUBLAS_STATUS_MAPPING_ERROR,
  CUBLAS_STATUS_EXECUTION_FAILED, CUBLAS_STATUS_INTERNAL_ERROR, CUBLAS_STATUS_NOT_SUPPORTED,
  CUBLAS_STATUS_LICENSE_ERROR } cublasStatus_t;
typedef struct cublasContext *cublasHandle_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 } cublasGemmAlgo_t;
#define CUBLAS_VER_MAJOR 13
#define CUBLAS_VER_MINOR 0
static inline const char *cublasGetStatusString(cublasStatus_t) { return ""; }
cublasStatus_t cublasCreate(cublasHandle_t *);
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t);
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t);
cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t);
"""


def tool(exe: str) -> str | None:
    """An NVIDIA command-line tool from the nvidia wheels, else PATH; None when missing."""
    try:
        import nvidia
        for p in nvidia.__path__:
            hits = glob.glob(os.path.join(p, "*", "bin", exe))
            if hits:
                return hits[0]
    except ImportError:
        pass
    return shutil.which(exe)


def ggml_root(ggml: str | None, source: str) -> str | None:
    """The folder holding `src/ggml-cuda/<source>` in a ggml checkout or a llama.cpp checkout
    (whose ggml lives in `ggml/`); None when neither has it."""
    if not ggml:
        return None
    return next((r for r in (ggml, os.path.join(ggml, "ggml"))
                 if os.path.isfile(os.path.join(r, "src", "ggml-cuda", source))), None)


def _env(exe: str) -> dict:
    return dict(os.environ, PATH=os.path.dirname(exe) + os.pathsep + os.environ["PATH"])


def compile_cubin(root: str, source: str, arch: str, workdir: str, name: str = "k",
                  flags: tuple[str, ...] = ()) -> str:
    """nvcc `source` (a path, compiled with ggml's include folders) to a cubin for `arch` in
    `workdir`; returns the cubin's path.  RuntimeError with nvcc's message when it fails."""
    nvcc = tool("nvcc")
    if nvcc is None:
        raise RuntimeError("no nvcc (pip install nvidia-cuda-nvcc)")
    with open(os.path.join(workdir, "cublas_v2.h"), "w") as f:
        f.write(CUBLAS_STUB)
    inc = os.path.join(os.path.dirname(os.path.dirname(nvcc)), "include")
    cubin = os.path.join(workdir, f"{name}.cubin")
    p = subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-O3", "-std=c++17", *flags,
                        "-I" + os.path.join(root, "include"), "-I" + os.path.join(root, "src"),
                        "-I" + os.path.join(root, "src", "ggml-cuda"), "-I" + workdir,
                        "-I" + inc, source, "-o", cubin],
                       capture_output=True, text=True, env=_env(nvcc))
    if p.returncode:
        raise RuntimeError("nvcc failed:\n" + (p.stdout + p.stderr)[-2000:])
    return cubin


def disassemble(cubin: str) -> str:
    """`cuobjdump -sass` text of a cubin."""
    cuobjdump = tool("cuobjdump")
    return subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True,
                          env=_env(cuobjdump), check=True).stdout


def resources(cubin: str) -> dict[str, dict[str, int]]:
    """{function: {'REG': n, 'STACK': bytes, 'SHARED': bytes, 'LOCAL': bytes}} from
    `cuobjdump -res-usage`."""
    cuobjdump = tool("cuobjdump")
    text = subprocess.run([cuobjdump, "-res-usage", cubin], capture_output=True, text=True,
                          env=_env(cuobjdump), check=True).stdout
    out, cur = {}, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Function "):
            cur = line[len("Function "):].rstrip(":")
        elif cur and line.startswith("REG:"):
            out[cur] = {k: int(v) for k, v in (f.split(":") for f in line.split())
                        if v.isdigit()}
    return out
