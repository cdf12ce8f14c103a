"""numpy references for the quantized operators (SPEC §1 HiFloat8, §3, §4, §5), written
from the spec without libcommfuse, for the tests of test_quant_ops.py and
test_alltoall_ops.py."""

import ml_dtypes
import numpy as np

F32 = np.float32


def _hif8_value(code):
    """Value of one HiFloat8 code (SPEC §1 table), as a Python float."""
    if code == 0x80:
        return float("nan")
    if code in (0x6F, 0xEF):
        return float("-inf") if code & 0x80 else float("inf")
    sign = -1.0 if code & 0x80 else 1.0
    b = code & 0x7F
    if b >> 5 == 0b11:
        d, w, rest = 4, 1, b & 0x1F
    elif b >> 5 == 0b10:
        d, w, rest = 3, 2, b & 0x1F
    elif b >> 5 == 0b01:
        d, w, rest = 2, 3, b & 0x1F
    elif b >> 4 == 0b001:
        d, w, rest = 1, 3, b & 0x0F
    elif b >> 3 == 0b0001:
        d, w, rest = 0, 3, b & 0x07
    else:  # dot 0000: denormal 2^(M-23), M = 0 is zero
        m = b & 0x07
        return sign * (0.0 if m == 0 else 2.0 ** (m - 23))
    m = rest & ((1 << w) - 1)
    e_bits = rest >> w
    if d == 0:
        e = 0
    else:
        neg = e_bits >> (d - 1)
        low = e_bits & ((1 << (d - 1)) - 1)
        e = (2 ** (d - 1) + low) * (-1 if neg else 1)
    return sign * 2.0 ** e * (1 + m / 2 ** w)


HIF8_VALUES = np.array([_hif8_value(c) for c in range(256)], dtype=np.float64)
# SPEC §1 check values.
assert [HIF8_VALUES[c] for c in (0x08, 0x10, 0x18, 0x20, 0x40, 0x60, 0x07, 0x6E, 0x7E, 0x01)] == [
    1.0, 2.0, 0.5, 4.0, 16.0, 256.0, 2.0 ** -16, 32768.0, 2.0 ** -15, 2.0 ** -22]

# name -> numpy dtype of code arrays; qmax of per_token_group quantization (SPEC §5).
CODE_DTYPES = {
    "int8": np.dtype(np.int8),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "hifloat8": np.dtype(np.uint8),
}
QMAX = {"int8": 127.0, "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0, "hifloat8": 15.0}
EMAX = {"float8_e4m3fn": 8, "float8_e5m2": 15}


def code_values(codes, name):
    """float32 values of codes (exact: every 8-bit value fits float32)."""
    if name == "hifloat8":
        return HIF8_VALUES[codes].astype(F32)
    return codes.astype(F32)


def random_codes(rng, name, shape):
    """Random finite codes of an 8-bit format."""
    raw = rng.integers(0, 256, shape).astype(np.uint8)
    if name == "int8":
        return raw.view(np.int8)
    if name == "hifloat8":
        bad = (raw == 0x80) | (raw == 0x6F) | (raw == 0xEF)
    elif name == "float8_e4m3fn":
        bad = (raw & 0x7F) == 0x7F
    else:  # e5m2: exponent all ones is inf / NaN
        bad = (raw & 0x7C) == 0x7C
    raw[bad] = 0x08
    return raw if name == "hifloat8" else raw.view(CODE_DTYPES[name])


def scale_values(scales, mode):
    """float32 scale per group: K-G float32 as is; MX E8M0 (…, H/64, 2) -> (…, H/32)."""
    if mode == "mx":
        s = scales.reshape(scales.shape[:-2] + (-1,)).view(np.uint8).astype(np.int32)
        return np.ldexp(np.ones(s.shape, F32), s - 127).astype(F32)
    return scales.astype(F32)


def dequant(codes, scales, name, mode):
    """codes · scale, one fp32 multiply per element (SPEC §4)."""
    g = 32 if mode == "mx" else 128
    v = code_values(codes, name)
    s = np.repeat(scale_values(scales, mode), g, axis=-1)
    return (v * s).astype(F32)


def rank_sum(blocks):
    """fp32 sum in rank order 0..R-1 (SPEC §0)."""
    acc = blocks[0].astype(F32)
    for b in blocks[1:]:
        acc = (acc + b).astype(F32)
    return acc


def round_to(x32, dt):
    """One RNE rounding of float32 values to dt (numpy and ml_dtypes casts are RNE)."""
    return x32.astype(dt)


def quantize_kg(x32, name):
    """SPEC §5 per_token_group for int8 / fp8: (codes, float32 scales), or (None, scales)
    for hifloat8 (whose encoder these tests do not re-implement)."""
    lead, h = x32.shape[:-1], x32.shape[-1]
    groups = x32.reshape(lead + (h // 128, 128))
    amax = np.abs(groups).max(axis=-1).astype(F32)
    scale = (amax / F32(QMAX[name])).astype(F32)
    scale[amax == 0] = 1
    v = (groups / scale[..., None]).astype(F32)
    if name == "int8":
        q = np.clip(np.rint(v), -127, 127).astype(np.int8)  # rint: half to even
    elif name == "hifloat8":
        return None, scale
    else:
        m = QMAX[name]
        q = np.clip(v, -m, m).astype(CODE_DTYPES[name])
    return q.reshape(x32.shape), scale


def quantize_mx(x32, name):
    """SPEC §5 mx: (codes, E8M0 scales (…, H/64, 2))."""
    lead, h = x32.shape[:-1], x32.shape[-1]
    groups = x32.reshape(lead + (h // 32, 32))
    amax = np.abs(groups).max(axis=-1)
    _, ex = np.frexp(amax)  # amax = f · 2^ex, f in [0.5, 1): floor(log2(amax)) = ex - 1
    e = np.clip(ex.astype(np.int32) - 1 - EMAX[name], -127, 127)
    byte = (e + 127).astype(np.uint8)
    byte[amax == 0] = 0
    e = byte.astype(np.int32) - 127
    v = np.ldexp(groups, -e[..., None]).astype(F32)
    m = QMAX[name]
    q = np.clip(v, -m, m).astype(CODE_DTYPES[name])
    return q.reshape(x32.shape), byte.reshape(lead + (h // 64, 2)).view(ml_dtypes.float8_e8m0fnu)


def permuted(blocks, rank):
    """SPEC §3: permuted[i, s*H:(s+1)*H] = x1 of rank s, row rank*BS/R + i."""
    r = len(blocks)
    rows = blocks[0].shape[0] // r
    return np.concatenate([b[rank * rows:(rank + 1) * rows] for b in blocks], axis=1)


def dynamic_quantize(perm, q_max, smooth=None):
    """SPEC §3 mode 7 per permuted row: (int codes, float32 scale per row)."""
    v = perm.astype(F32)
    if smooth is not None:
        v = (v * smooth.astype(F32)).astype(F32)
    amax = np.abs(v).max(axis=1).astype(F32)
    safe = np.where(amax == 0, F32(1), amax)
    inv = (F32(q_max) / safe).astype(F32)
    q = np.clip(np.rint((v * inv[:, None]).astype(F32)), -q_max, q_max).astype(np.int64)
    q[amax == 0] = 0
    s = (amax / F32(q_max)).astype(F32)
    return q, s
