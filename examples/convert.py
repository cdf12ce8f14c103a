"""Number formats (SPEC §1): commfuse.convert between float32 and the 8-bit formats.

    python3 examples/convert.py
"""

import sys

import ml_dtypes
import numpy as np

import commfuse

x = np.array([1.0, 2.0, 0.5, 40960.0, -3.3], np.float32)
codes = commfuse.convert(x, "hifloat8")  # uint8 codes; 40960 overflows HiFloat8 to inf
back = commfuse.convert(codes, "float32", src_dtype="hifloat8")
e4m3 = commfuse.convert(x, ml_dtypes.float8_e4m3fn, saturate=True)
print("float32       ", x)
print("hifloat8 codes", [hex(c) for c in codes])
print("decoded       ", back)
print("e4m3 saturated", e4m3.astype(np.float32))
# saturate=True is clamp-to-±448 then round (ml_dtypes' cast would give NaN for 40960).
want_e4m3 = np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn)
ok = (codes[:4].tolist() == [0x08, 0x10, 0x18, 0x6F] and back[3] == np.inf
      and np.array_equal(e4m3.view(np.uint8), want_e4m3.view(np.uint8)))
print(f"convert: {'verified against SPEC check values and ml_dtypes (PASS)' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
