"""What a kernel fault on a real GPU means, told the way a user can act on it.

A kernel that touches memory it does not own (or traps, or misaligns a vector access) does not
fail its own `cuLaunchKernel`: launches are asynchronous, so the error shows up at the next call
that waits on the GPU (a copy back, a synchronise, the next launch), and from then on *every*
call in that CUDA context returns the same error (CUDA's "sticky" errors: the driver API
documents that the process must be restarted to use CUDA again).  The raw driver text
("cuMemcpyDtoHAsync failed: CUDA_ERROR_ILLEGAL_ADDRESS") names neither the kernel nor that rule;
this module keeps the name of the last kernel launched and turns a sticky result into a message
that says which kernel most likely faulted, that the context is lost, and how to find the bad
access: the CPU executor (`PYPTX_DEVICE=cpu`, `pyptx.sanitize`) reports thread, PTX line and
array.  Found on the first H100 run, where out-of-bounds test kernels ended in that raw text.
"""
from __future__ import annotations

#: CUresult names after which the context is unusable (cuda.h: "the process must be terminated
#: and relaunched"), each with what the kernel did, in words
STICKY = {
    "CUDA_ERROR_ILLEGAL_ADDRESS": "read or wrote memory outside every allocation",
    "CUDA_ERROR_MISALIGNED_ADDRESS": "made a misaligned access (a vector or wide load/store at an "
                                     "address not a multiple of its size)",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION": "executed an illegal instruction",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE": "used an address in the wrong state space",
    "CUDA_ERROR_INVALID_PC": "jumped to an invalid program counter",
    "CUDA_ERROR_HARDWARE_STACK_ERROR": "overflowed or corrupted the call stack",
    "CUDA_ERROR_LAUNCH_FAILED": "failed while running",
    "CUDA_ERROR_ASSERT": "hit a device-side assert or trap",
    "CUDA_ERROR_LAUNCH_TIMEOUT": "ran longer than the display watchdog allows",
}

#: the entry name of the last kernel handed to cuLaunchKernel in this process (set per launch:
#: one store; a fault is reported later, so the last launch is the likeliest culprit)
last_kernel: list = [None]


def explain(what: str, name: str, desc: str) -> str:
    """The DeviceError message for driver call `what` failing with CUresult `name`."""
    raw = f"{what} failed: {name}" + (f" ({desc})" if desc else "")
    did = STICKY.get(name)
    if did is None:
        return raw
    who = last_kernel[0]
    kernel = (f"kernel '{who}' (the last one launched before the error showed up; launches "
              f"are asynchronous)" if who else "a kernel")
    return (f"{raw}: {kernel} {did} on the GPU.  The CUDA context is now lost: every later GPU "
            f"call in this process fails with {name} (CUDA's rule), so restart the process.  "
            f"To find the access, run the same launch on the CPU executor (PYPTX_DEVICE=cpu, "
            f"or inside `with pyptx.sanitize():`), which names the thread, the PTX line and "
            f"the array.")
