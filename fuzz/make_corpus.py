#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<target>/ in the input format of fuzz/README.md.

Each op target gets valid W = 1 calls of every kind SPEC §2-§4 defines (so the fuzzer starts
from inputs that plan and execute), a few rejected ones, bad workspaces and the inputs that
found bugs; convert gets every format family. Rerun after changing the format:
`python3 fuzz/make_corpus.py` (it replaces fuzz/corpus/).
"""
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)

# decode.cpp's dtype table and edge selectors.
DT = {n: i for i, n in enumerate(
    "f16 bf16 f32 i8 i4 hif8 e4m3 e5m2 e8m0 i32 i64 u8 i16 u16 bool".split())}
FLOAT = {"f16": 0, "bf16": 1, "f32": 2}  # decode_float_dtype
EDGE = {-1: 0xF0, 2**31: 0xF2, 3037000500: 0xF4, 2**62: 0xF5, INT64_MAX: 0xF6,
        INT64_MIN: 0xF7, 2**21: 0xF8}


def edge(v):
    if v in EDGE:
        return bytes([EDGE[v]])
    for sel, delta in ((0xF9, 0), (0xFA, -1), (0xFB, 1)):  # 2^e, 2^e - 1, 2^e + 1
        e = (v - delta).bit_length() - 1
        if 0 <= e < 63 and v - delta == 1 << e:
            return bytes([sel, e])
    return b"\xff" + struct.pack("<q", v)


def dim(v):
    if 0 <= v < 0xC0:
        return bytes([v])
    if v % 64 == 0 and 64 <= v <= 3072:
        return bytes([0xBF + v // 64])
    return edge(v)


def size(v, usual):
    """A problem dimension (decode_size): 0 is `usual`, 1..0xBF are 0..190."""
    if v == usual:
        return b"\x00"
    if 0 <= v <= 190:
        return bytes([v + 1])
    return dim(v) if v >= 0xC0 else edge(v)


def stride(v):
    if 0 <= v < 0x80:
        return bytes([v])
    if -64 <= v <= -1:
        return bytes([0x7F - v])
    if v % 64 == 0 and 64 <= v <= 3072:
        return bytes([0xBF + v // 64])
    return edge(v)


def integer(v, usual):
    if v == usual:
        return b"\x00"
    if -16 <= v <= 222 and v != -0x11:
        return bytes([v + 0x11])
    return edge(v)


def boolean(v):
    return bytes([1 if v else 0])


def dtype_code(dtype):
    """A dtype by table name, or a raw value (0xFF then 4 bytes for any int)."""
    if isinstance(dtype, str):
        return bytes([DT[dtype]])
    return bytes([dtype]) if 15 <= dtype < 0xFF else b"\xff" + struct.pack("<i", dtype)


def tensor(dtype=None, shape=None, strides=None, transpose=False, null_data=False, fill=0,
           seed=0, flip=False):
    """A tensor argument that is passed: its canonical form unless dtype / shape / strides
    are given. `flip` for an argument whose usual value is NULL (optional ones)."""
    flags = ((1 if flip else 0) | (2 if strides is not None else 0) | (4 if null_data else 0) |
             (8 if transpose else 0) | (fill << 4) | (0x40 if dtype is not None else 0) |
             (0x80 if shape is not None else 0))
    out = bytes([flags])
    if dtype is not None:
        out += dtype_code(dtype)
    if shape is not None:
        n = len(shape)
        out += (bytes([n - 1]) if 1 <= n <= 4 else bytes([0xE0 + n])) + \
            b"".join(dim(d) for d in shape)
    if strides is not None:
        out += b"".join(stride(s) for s in strides)
    return out + bytes([seed])


def opt(**kw):
    """An optional argument (usual NULL) passed."""
    return tensor(flip=True, **kw)


T = tensor()  # a required argument as a valid call has it
SKIP = b"\x00"  # an optional argument left NULL (its usual value)
NULL = b"\x01"  # a required argument passed as NULL
USUAL = b"\x00"  # a string / int / int array at its usual value


def string_wrong(k):
    return bytes([0xC0 + k])


def write(target, name, data):
    d = ROOT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def all_gather_matmul():
    t = "all_gather_matmul"

    def call(m=4, k=16, n=8, dt="f16", x1=T, x2=T, bias=SKIP, out=T, gather=T, group=USUAL,
             gather_index=0, comm_turn=0, stream=1, flags=0):
        return (bytes([flags]) + size(m, 4) + size(k, 16) + size(n, 8) + bytes([FLOAT[dt]]) +
                group + integer(gather_index, 0) + integer(comm_turn, 0) + integer(stream, 1) +
                x1 + x2 + bias + out + gather)

    write(t, "f16_bias_gather", call(bias=opt()))
    write(t, "bf16_x2t_f32bias_nogather",
          call(dt="bf16", x2=tensor(transpose=True), bias=opt(dtype="f32"), gather=NULL))
    write(t, "f32_turn3", call(m=5, k=12, n=7, dt="f32", x1=tensor(fill=1), comm_turn=3))
    write(t, "f32_m0", call(m=0, dt="f32"))
    write(t, "f16_gather_shape0", call(gather=tensor(shape=[0])))
    write(t, "f32_x2_row_block", call(dt="f32", x2=tensor(strides=[12, 1])))
    write(t, "bad_workspace_null", call(gather=NULL, flags=2))
    write(t, "null_executor_pointer", call(flags=0xF2))
    write(t, "reject_gather_index", call(gather_index=1))
    write(t, "reject_unknown_group", call(group=string_wrong(0)))
    write(t, "huge_m", call(m=2**31, gather=NULL))
    # Found by fuzzing or for bugs of its kind; each once broke the library (git log).
    write(t, "found_stride_overflow", call(x1=tensor(shape=[INT64_MAX, 2**21])))
    write(t, "found_negative_dtype", call(x2=tensor(dtype=-1)))
    write(t, "found_unknown_dtype", call(x1=tensor(dtype=195)))
    write(t, "found_x2_bytes_overflow", call(k=2**31, n=2**30, gather=NULL))  # k·n·4 in int64
    # SPEC §6 (V2 entry point): the call flags' bits 4-6 pick the form (support/decode.hpp).
    for form, name in ((1, "v2_f16"), (2, "v2_a8w8"), (3, "v2_fp8"), (4, "v2_fp8_mixed"),
                       (6, "v2_hif8"), (7, "v2_a8w8_int32_bias")):
        write(t, name, call(flags=form << 4))
    write(t, "v2_a8w8_x2t_nogather", call(flags=2 << 4, x2=tensor(transpose=True), gather=NULL))
    write(t, "v2_reject_no_x2_scale", call(flags=2 << 4) + T + NULL)  # x1Scale, x2Scale NULL


def matmul_reducing(t):
    all_reduce = t == "matmul_all_reduce"

    def call(m=4, k=16, n=8, batch=0, dt="f16", x1=T, x2=T, bias=SKIP, out=T, group=USUAL,
             reduce_op=USUAL, comm_turn=0, stream=1, flags=0):
        problem = size(m, 4) + size(k, 16) + size(n, 8) + (size(batch, 0) if all_reduce else b"")
        return (bytes([flags]) + problem + bytes([FLOAT[dt]]) + group + reduce_op +
                integer(comm_turn, 0) + integer(stream, 1) + x1 + x2 + bias + out)

    write(t, "f16_bias", call(bias=opt()))
    write(t, "bf16_x2t_f32bias", call(dt="bf16", x2=tensor(transpose=True),
                                      bias=opt(dtype="f32")))
    write(t, "f32_turn2", call(m=6, k=10, n=5, dt="f32", x1=tensor(fill=1), comm_turn=2))
    write(t, "f32_m0", call(m=0, dt="f32"))
    write(t, "bad_workspace_small", call(dt="f32", flags=1))
    write(t, "reject_reduce_op", call(reduce_op=string_wrong(0)))
    write(t, "huge_k", call(k=2**40))
    for form, name in ((1, "v2_bf16"), (2, "v2_a8w8"), (4, "v2_fp8_mixed"), (6, "v2_hif8"),
                       (7, "v2_a8w8_bias")):
        write(t, name, call(flags=form << 4, dt="bf16"))
    if all_reduce:
        write(t, "f16_3d", call(m=3, batch=2))
        write(t, "v2_a8w8_3d", call(m=3, batch=2, flags=2 << 4))
        write(t, "bf16_3d_empty", call(m=0, batch=2, dt="bf16"))


def alltoall_quant_matmul():
    t = "alltoall_quant_matmul"
    combos = {"a16w8": 0, "a16w4": 1, "a4w4": 2}

    def call(combo="a16w8", bf16=False, bs=2, h=8, n=6, group=USUAL, axes=USUAL, modes=USUAL * 2,
             reserved=USUAL * 4, transpose_x2=False, x1=T, x2=T, bias=SKIP, x1_scale=None,
             x2_scale=T, comm_scale=SKIP, x1_offset=SKIP, x2_offset=SKIP, out=T, a2a=SKIP,
             flags=0):
        if x1_scale is None:
            x1_scale = T if combo == "a4w4" else SKIP
        return (bytes([flags, combos[combo] + (3 if bf16 else 0)]) + size(bs, 2) + size(h, 8) +
                size(n, 6) + group + axes + modes + reserved + boolean(False) +
                boolean(transpose_x2) + x1 + x2 + bias + x1_scale + x2_scale + comm_scale +
                x1_offset + x2_offset + out + a2a)

    write(t, "a16w8_f16", call())
    write(t, "a16w8_bf16_bias_smooth_a2a",
          call(bf16=True, x1=tensor(fill=1), x2=tensor(fill=1), bias=opt(), x1_scale=opt(),
               a2a=opt()))
    write(t, "a16w8_x2t", call(transpose_x2=True, axes=b"\x01"))
    write(t, "a16w4_bias_x1dtype", call(combo="a16w4", bs=4, bias=opt(dtype="f16")))
    write(t, "a4w4_a2a", call(combo="a4w4", bf16=True, a2a=opt()))
    write(t, "a16w8_zero_rows", call(x1=tensor(fill=2)))
    write(t, "a16w8_edge_values", call(x1=tensor(fill=3), x2=tensor(fill=1)))
    write(t, "reject_comm_scale", call(comm_scale=opt()))
    write(t, "reject_group_size", call(reserved=USUAL * 3 + integer(128, 0)))
    write(t, "reject_a16_mode3", call(modes=integer(3, 7) + USUAL))


def alltoall_matmul():
    t = "alltoall_matmul"

    def call(bs=3, h=8, n=5, dt="f32", group=USUAL, axes=USUAL, transpose_x2=False, x1=T, x2=T,
             bias=SKIP, out=T, a2a=SKIP, flags=0):
        return (bytes([flags]) + size(bs, 3) + size(h, 8) + size(n, 5) + bytes([FLOAT[dt]]) +
                group + axes + boolean(False) + boolean(transpose_x2) + x1 + x2 + bias + out +
                a2a)

    write(t, "f32", call())
    write(t, "f16_bias_a2a", call(dt="f16", bias=opt(dtype="f32"), a2a=opt()))
    write(t, "bf16_x2t", call(dt="bf16", transpose_x2=True, axes=b"\x01"))
    write(t, "bad_workspace_misaligned", call(dt="f16", flags=3))
    write(t, "reject_axes", call(axes=b"\x02"))
    write(t, "reject_empty", call(bs=0))


def quant_reducing(t):
    # quant_problem.cpp: format byte = code index (K-G int8, hif8, e4m3, e5m2; MX e4m3, e5m2)
    # + 6 * output (f32, f16, bf16).
    formats = {"kg_int8": 0, "kg_hif8": 1, "kg_e4m3": 2, "kg_e5m2": 3, "mx_e4m3": 4,
               "mx_e5m2": 5}
    outputs = {"f32": 0, "f16": 1, "bf16": 2}

    def call(fmt="kg_int8", out_dt="f32", bs=2, groups=1, batch=0, group=USUAL,
             reduce_op=USUAL, x=T, scales=T, out=T, flags=0):
        return (bytes([flags, formats[fmt] + 6 * outputs[out_dt]]) + size(bs, 2) +
                bytes([groups - 1]) + size(batch, 0) + group + reduce_op + x + scales + out)

    write(t, "kg_int8_f32", call(groups=2))
    write(t, "kg_hif8_bf16_3d", call(fmt="kg_hif8", out_dt="bf16", batch=1, x=tensor(fill=1)))
    write(t, "kg_e5m2_f16_edges", call(fmt="kg_e5m2", out_dt="f16", x=tensor(fill=3)))
    write(t, "kg_e4m3_bf16", call(fmt="kg_e4m3", out_dt="bf16", bs=5, groups=3))
    write(t, "mx_e4m3_bf16", call(fmt="mx_e4m3", out_dt="bf16", groups=2))
    write(t, "mx_e5m2_f32_3d", call(fmt="mx_e5m2", batch=2, bs=1, x=tensor(fill=1)))
    write(t, "bad_workspace_small", call(out_dt="bf16", flags=1))
    write(t, "reject_h", call(x=tensor(shape=[2, 100])))
    write(t, "reject_null_x_data", call(x=tensor(null_data=True)))


def convert():
    t = "convert"

    def call(src, dst, data, saturate=False, count=0, flags=0):
        return (dtype_code(src) + dtype_code(dst) + bytes([flags | (1 if saturate else 0)]) +
                struct.pack("<H", count) + data)

    def f32(*v):
        return struct.pack(f"<{len(v)}f", *v)

    edges = f32(0.0, -0.0, 1.0, -1.0, 448.0, 464.0, 465.0, 57344.0, 61440.0, 40960.0, 32768.0,
                65504.0, 1e-40, 2**-127, float("inf"), float("-inf"), float("nan"), 3.4e38,
                0.5, 1.5, 2.5, -2.5, 127.5, -128.5)
    for dst in ("f16", "bf16", "e4m3", "e5m2", "hif8", "e8m0", "i4", "i8", "i32", "i64"):
        write(t, f"f32_to_{dst}", call("f32", dst, edges))
        write(t, f"f32_to_{dst}_sat", call("f32", dst, edges, saturate=True))
    every_byte = bytes(range(256))
    for src in ("e4m3", "e5m2", "hif8", "e8m0", "i8", "i4"):
        write(t, f"{src}_to_f32", call(src, "f32", every_byte))
    write(t, "f16_to_bf16", call("f16", "bf16", every_byte))
    write(t, "bf16_to_e4m3_sat", call("bf16", "e4m3", every_byte, saturate=True))
    write(t, "i32_to_i8", call("i32", "i8", struct.pack("<6i", 0, 127, 128, -129, 2**31 - 1,
                                                        -2**31)))
    write(t, "i64_to_hif8", call("i64", "hif8", struct.pack("<3q", 2**62, -5, 40960)))
    write(t, "i4_to_i4_odd", call("i4", "i4", b"\x7f\x80\x12", count=5))
    write(t, "pack_in_range", call("i8", "i8", bytes([0, 7, 0xF8, 3, 0xFF])))
    write(t, "reject_unknown_dtype", call(99, "f32", b"\x00" * 8))
    write(t, "reject_data_movement", call("u8", "f32", b"\x00" * 8))
    write(t, "reject_null_src", call("f32", "f16", b"\x00" * 8, flags=4))
    write(t, "name_bf16", call("f32", "f32", b"bfloat16"))
    write(t, "found_unknown_dtype_bits", call(195, "f32", b"\x00" * 8))  # unnamed message
    write(t, "found_negative_dtype", call("f32", -1, b"\x00" * 8))  # outside the enum


def main():
    # finding_* files are inputs a fuzzer found, kept byte for byte (fuzz/README.md): not ours
    # to regenerate.
    if ROOT.exists():
        for f in ROOT.rglob("*"):
            if f.is_file() and not f.name.startswith("finding_"):
                f.unlink()
    all_gather_matmul()
    matmul_reducing("matmul_reduce_scatter")
    matmul_reducing("matmul_all_reduce")
    alltoall_quant_matmul()
    alltoall_matmul()
    quant_reducing("quant_all_reduce")
    quant_reducing("quant_reduce_scatter")
    convert()
    files = [f for f in ROOT.rglob("*") if f.is_file()]
    print(f"{len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes in {ROOT}")


if __name__ == "__main__":
    main()
