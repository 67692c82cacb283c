"""The fake driver's tensor-map encoder, `cuTensorMapEncodeTiled` (a mixin of
`fake_driver.FakeDriver`): the driver's argument rules checked one by one, and the map encoded
the way pyptx's CPU executor reads it, so a fake-GPU launch can run the TMA copies.

Separate from fake_driver.py because it is a self-contained rule table of its own (the CUDA
driver API's cuTensorMapEncodeTiled requirements), unrelated to contexts, memory or launches.
"""
from __future__ import annotations

import struct

from cuda.bindings import driver as _real

R = _real.CUresult


class TensorMapEncoder:
    """cuTensorMapEncodeTiled, and the CUtensorMap* enums pyptx reads from the driver."""

    CUtensorMapDataType = _real.CUtensorMapDataType
    CUtensorMapInterleave = _real.CUtensorMapInterleave
    CUtensorMapSwizzle = _real.CUtensorMapSwizzle
    CUtensorMapL2promotion = _real.CUtensorMapL2promotion
    CUtensorMapFloatOOBfill = _real.CUtensorMapFloatOOBfill

    def cuTensorMapEncodeTiled(self, dtype, rank, address, dims, strides, box, elem_strides,
                               interleave, swizzle, l2, oob):
        """The driver's argument rules (CUDA driver API, cuTensorMapEncodeTiled), checked here
        on their own, for the tiled non-interleaved maps of the data types up to BFLOAT16; the
        map it returns holds the CPU executor's encoding (pyptx/runtime/cpu/tma.py), so a
        launch of this fake can run the copies.  Needs compute capability 9.0 like the real
        call.  Every broken rule is CUDA_ERROR_INVALID_VALUE (`self.last_tensormap_error` says
        which)."""
        from pyptx.runtime.cpu.tma import encode
        e = self._call("cuTensorMapEncodeTiled", dtype, rank, address, dims, strides, box,
                       elem_strides, interleave, swizzle, l2, oob)
        if e is not None:
            return (e, None)
        why = self._tensormap_rule(int(dtype), rank, int(address), list(dims), list(strides),
                                   list(box), list(elem_strides), int(interleave),
                                   int(swizzle), int(l2), int(oob))
        self.last_tensormap_error = why
        if why is not None:
            return (R.CUDA_ERROR_INVALID_VALUE, None)
        raw = encode(int(dtype), int(address), [int(d) for d in dims],
                     [int(s) for s in strides], [int(b) for b in box],
                     [int(x) for x in elem_strides], int(swizzle), int(interleave), int(l2),
                     int(oob))
        tmap = _real.CUtensorMap()
        tmap.opaque = list(struct.unpack("<16Q", raw))
        return (R.CUDA_SUCCESS, tmap)

    _ELEM = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2}

    def _tensormap_rule(self, dtype, rank, address, dims, strides, box, elem_strides,
                        interleave, swizzle, l2, oob):
        if self.cc < (9, 0):
            return "tensor maps need compute capability 9.0"
        if dtype not in self._ELEM:
            return "data type"
        es = self._ELEM[dtype]
        if not isinstance(rank, int) or not 1 <= rank <= 5:
            return "rank 1..5"
        if (len(dims), len(strides), len(box), len(elem_strides)) != (rank, rank - 1, rank,
                                                                       rank):
            return "array lengths"
        if address % 16 or address == 0:
            return "globalAddress 16-byte aligned"
        if self._allocation_at(address) is None:
            return "globalAddress in device memory"
        if any(not 0 < d <= 2**32 for d in dims):
            return "globalDim 1..2^32"
        if any(s % 16 or not 0 < s < 2**40 for s in strides):
            return "globalStrides multiples of 16 below 2^40"
        if any(not 0 < b <= 256 for b in box):
            return "boxDim 1..256"
        if interleave != 0:
            return "interleave NONE only (this fake)"
        if box[0] * es % 16:
            return "boxDim[0] * elementSize a multiple of 16"
        if any(not 0 < x <= 8 for x in elem_strides):
            return "elementStrides 1..8"
        if swizzle not in (0, 1, 2, 3):
            return "swizzle NONE/32B/64B/128B (this fake)"
        if swizzle and box[0] * es > (32, 64, 128)[swizzle - 1]:
            return "box inner dimension <= swizzle span"
        if l2 not in (0, 1, 2, 3) or oob not in (0, 1):
            return "l2Promotion / oobFill"
        if oob == 1 and dtype in (0, 1, 2, 3, 4, 5):
            return "NaN OOB fill needs a float type"
        return None
