#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<target>/ in the input format of fuzz/README.md.

Each op target gets valid calls of every kind SPEC §2-§4 defines at W = 1 (so the fuzzer
starts from inputs that plan and execute) and a few rejected ones; convert gets every
format pair family. Run it again after changing the format: `python3 fuzz/make_corpus.py`.
"""
import hashlib
import pathlib
import shutil
import struct

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)

# decode.cpp's dtype table.
DT = {n: i for i, n in enumerate(
    "f16 bf16 f32 i8 i4 hif8 e4m3 e5m2 e8m0 i32 i64 u8 i16 u16 bool".split())}
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
    """A dtype by table name, or a raw value (decode.cpp: 0xFF then 4 bytes for any int)."""
    if isinstance(dtype, str):
        return bytes([DT[dtype]])
    return bytes([dtype]) if 15 <= dtype < 0xFF else b"\xff" + struct.pack("<i", dtype)


def tensor(dtype, shape, strides=None, transpose=False, null_data=False, fill=0, seed=0,
           optional=False):
    """A present tensor; `optional`: the argument takes NULL (flags bit 0 set = present)."""
    flags = (1 if optional else 0) | (2 if strides is not None else 0) | \
            (4 if null_data else 0) | (8 if transpose else 0) | (fill << 4)
    dt = dtype_code(dtype)
    n = len(shape)
    nd = bytes([n - 1]) if 1 <= n <= 4 else bytes([0xE0 + n])
    out = bytes([flags]) + dt + nd + b"".join(dim(d) for d in shape)
    if strides is not None:
        out += b"".join(stride(s) for s in strides)
    return out + bytes([seed])


ABSENT = b"\x01"  # a required tensor passed as NULL
OPT_ABSENT = b"\x00"  # an optional one left out (its usual value)


def opt(dtype, shape, **kw):
    return tensor(dtype, shape, optional=True, **kw)

USUAL = b"\x00"  # a string, int or int array at its usual value (group name, "sum", ...)


def string_wrong(k):
    return bytes([0xC0 + k])


NULL_STRING, EMPTY_STRING = b"\xe0", b"\xf0"


def raw_string(s):
    return b"\xf8" + bytes([len(s)]) + s


def write(target, name, data):
    d = ROOT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def all_gather_matmul():
    t = "all_gather_matmul"

    def call(x1, x2, bias, out, gather, group=USUAL, gather_index=0, comm_turn=0, stream=1,
             flags=0):
        return (bytes([flags]) + x1 + x2 + bias + group + integer(gather_index, 0) +
                integer(comm_turn, 0) + integer(stream, 1) + out + gather)

    m, k, n = 4, 16, 8
    write(t, "f16_bias_gather", call(tensor("f16", [m, k]), tensor("f16", [k, n]),
                                     opt("f16", [n]), tensor("f16", [m, n]),
                                     opt("f16", [m, k])))
    write(t, "bf16_x2t_f32bias_nogather",
          call(tensor("bf16", [m, k]), tensor("bf16", [k, n], transpose=True),
               opt("f32", [n]), tensor("bf16", [m, n]), OPT_ABSENT))
    write(t, "f32_turn3", call(tensor("f32", [5, 12], fill=1), tensor("f32", [12, 7]),
                               OPT_ABSENT, tensor("f32", [5, 7]), opt("f32", [5, 12]),
                               comm_turn=3))
    write(t, "f32_m0", call(tensor("f32", [0, 8]), tensor("f32", [8, 3]), OPT_ABSENT,
                            tensor("f32", [0, 3]), opt("f32", [0, 8])))
    write(t, "f16_gather_shape0", call(tensor("f16", [2, 8]), tensor("f16", [8, 4]), OPT_ABSENT,
                                       tensor("f16", [2, 4]), opt("f16", [0])))
    write(t, "bad_workspace_null", call(tensor("f16", [m, k]), tensor("f16", [k, n]), OPT_ABSENT,
                                        tensor("f16", [m, n]), OPT_ABSENT, flags=2))
    write(t, "null_executor_pointer", call(tensor("f16", [m, k]), tensor("f16", [k, n]),
                                           OPT_ABSENT, tensor("f16", [m, n]), OPT_ABSENT,
                                           flags=0xF2))
    write(t, "reject_gather_index", call(tensor("f16", [m, k]), tensor("f16", [k, n]),
                                         OPT_ABSENT, tensor("f16", [m, n]), OPT_ABSENT,
                                         gather_index=1))
    write(t, "reject_unknown_group", call(tensor("f16", [m, k]), tensor("f16", [k, n]),
                                          OPT_ABSENT, tensor("f16", [m, n]), OPT_ABSENT,
                                          group=string_wrong(0)))
    write(t, "huge_m", call(tensor("f16", [2**31, k]), tensor("f16", [k, n]), OPT_ABSENT,
                            tensor("f16", [2**31, n]), OPT_ABSENT))
    # Found by fuzzing: each once broke commfuseCreateTensor (see the commit log).
    write(t, "found_stride_overflow", call(tensor("f16", [INT64_MAX, 2**21]),
                                           tensor("f16", [k, n]), OPT_ABSENT,
                                           tensor("f16", [m, n]), OPT_ABSENT))
    write(t, "found_negative_dtype", call(tensor("f16", [m, k]), tensor(-1, [k, n]), OPT_ABSENT,
                                          tensor("f16", [m, n]), OPT_ABSENT))
    write(t, "found_unknown_dtype", call(tensor(195, [m, k]), tensor("f16", [k, n]),
                                         OPT_ABSENT, tensor("f16", [m, n]), OPT_ABSENT))
    write(t, "found_x2_bytes_overflow", call(tensor("f16", [m, 2**31]),  # k·n·4 in int64
                                             tensor("f16", [2**31, 2**30]), OPT_ABSENT,
                                             tensor("f16", [m, 2**30]), OPT_ABSENT))


def matmul_reducing(t):
    def call(x1, x2, bias, out, group=USUAL, reduce_op=USUAL, comm_turn=0, stream=1, flags=0):
        return (bytes([flags]) + x1 + x2 + bias + group + reduce_op + integer(comm_turn, 0) +
                integer(stream, 1) + out)

    m, k, n = 4, 16, 8
    write(t, "f16_bias", call(tensor("f16", [m, k]), tensor("f16", [k, n]), opt("f16", [n]),
                              tensor("f16", [m, n])))
    write(t, "bf16_x2t_f32bias", call(tensor("bf16", [m, k]),
                                      tensor("bf16", [k, n], transpose=True), opt("f32", [n]),
                                      tensor("bf16", [m, n])))
    write(t, "f32_turn2", call(tensor("f32", [6, 10], fill=1), tensor("f32", [10, 5]),
                               OPT_ABSENT, tensor("f32", [6, 5]), comm_turn=2))
    write(t, "bad_workspace_small", call(tensor("f32", [m, k]), tensor("f32", [k, n]),
                                         OPT_ABSENT, tensor("f32", [m, n]), flags=1))
    write(t, "reject_reduce_op", call(tensor("f16", [m, k]), tensor("f16", [k, n]), OPT_ABSENT,
                                      tensor("f16", [m, n]), reduce_op=string_wrong(0)))
    write(t, "huge_k", call(tensor("f16", [m, 2**40]), tensor("f16", [2**40, n]), OPT_ABSENT,
                            tensor("f16", [m, n])))
    if t == "matmul_all_reduce":
        write(t, "f16_3d", call(tensor("f16", [2, 3, k]), tensor("f16", [k, n]), OPT_ABSENT,
                                tensor("f16", [2, 3, n])))
        write(t, "bf16_3d_empty", call(tensor("bf16", [2, 0, k]), tensor("bf16", [k, n]),
                                       OPT_ABSENT, tensor("bf16", [2, 0, n])))
    else:
        write(t, "f32_m0", call(tensor("f32", [0, k]), tensor("f32", [k, n]), OPT_ABSENT,
                                tensor("f32", [0, n])))


def alltoall_quant_matmul():
    t = "alltoall_quant_matmul"

    def call(x1, x2, x2_scale, out, bias=OPT_ABSENT, x1_scale=OPT_ABSENT, a2a=OPT_ABSENT,
             modes=(7, 2), transpose_x2=False, axes=USUAL,
             reserved=(OPT_ABSENT, OPT_ABSENT, OPT_ABSENT), comm=(0, -1, 2, 0), flags=0):
        return (bytes([flags]) + x1 + x2 + bias + x1_scale + x2_scale + b"".join(reserved) +
                USUAL + axes + integer(modes[0], 7) + integer(modes[1], 2) +
                integer(comm[0], 0) + integer(comm[1], -1) + integer(comm[2], 2) +
                integer(comm[3], 0) + boolean(False) + boolean(transpose_x2) + out + a2a)

    bs, h, n = 2, 8, 6
    write(t, "a16w8_f16", call(tensor("f16", [bs, h]), tensor("i8", [h, n]), tensor("f32", [n]),
                               tensor("f16", [bs, n])))
    write(t, "a16w8_bf16_bias_smooth_a2a",
          call(tensor("bf16", [bs, h], fill=1), tensor("i8", [h, n], fill=1), tensor("f32", [n]),
               tensor("bf16", [bs, n]), bias=opt("f32", [n]), x1_scale=opt("bf16", [h]),
               a2a=opt("bf16", [bs, h])))
    write(t, "a16w8_x2t", call(tensor("f16", [bs, h]), tensor("i8", [n, h]), tensor("f32", [n]),
                               tensor("f16", [bs, n]), transpose_x2=True, axes=b"\x01"))
    write(t, "a16w4", call(tensor("f16", [4, h]), tensor("i4", [h, n]), tensor("f32", [n]),
                           tensor("f16", [4, n]), bias=opt("f16", [n])))
    write(t, "a4w4", call(tensor("i4", [bs, h]), tensor("i4", [h, n]), tensor("f32", [n]),
                          tensor("bf16", [bs, n]), x1_scale=opt("f32", [bs]), modes=(3, 2),
                          a2a=opt("i4", [bs, h])))
    write(t, "a16w8_zero_rows", call(tensor("f16", [bs, h], fill=2), tensor("i8", [h, n]),
                                     tensor("f32", [n]), tensor("f16", [bs, n])))
    write(t, "reject_comm_scale", call(tensor("f16", [bs, h]), tensor("i8", [h, n]),
                                       tensor("f32", [n]), tensor("f16", [bs, n]),
                                       reserved=(opt("f32", [n]), OPT_ABSENT, OPT_ABSENT)))
    write(t, "reject_group_size", call(tensor("f16", [bs, h]), tensor("i8", [h, n]),
                                       tensor("f32", [n]), tensor("f16", [bs, n]),
                                       comm=(0, -1, 2, 128)))


def alltoall_matmul():
    t = "alltoall_matmul"

    def call(x1, x2, out, bias=OPT_ABSENT, a2a=OPT_ABSENT, transpose_x2=False, axes=USUAL,
             flags=0):
        return (bytes([flags]) + x1 + x2 + bias + USUAL + axes + boolean(False) +
                boolean(transpose_x2) + out + a2a)

    bs, h, n = 3, 8, 5
    write(t, "f32", call(tensor("f32", [bs, h]), tensor("f32", [h, n]), tensor("f32", [bs, n])))
    write(t, "f16_bias_a2a", call(tensor("f16", [bs, h]), tensor("f16", [h, n]),
                                  tensor("f16", [bs, n]), bias=opt("f32", [n]),
                                  a2a=opt("f16", [bs, h])))
    write(t, "bf16_x2t", call(tensor("bf16", [bs, h]), tensor("bf16", [n, h]),
                              tensor("bf16", [bs, n]), transpose_x2=True, axes=b"\x01"))
    write(t, "bad_workspace_misaligned", call(tensor("f16", [bs, h]), tensor("f16", [h, n]),
                                              tensor("f16", [bs, n]), flags=3))
    write(t, "reject_axes", call(tensor("f32", [bs, h]), tensor("f32", [h, n]),
                                 tensor("f32", [bs, n]), axes=b"\x02"))
    write(t, "reject_empty", call(tensor("f32", [0, h]), tensor("f32", [h, n]),
                                  tensor("f32", [0, n])))


def quant_reducing(t):
    def call(x, scales, out, group=USUAL, reduce_op=USUAL, flags=0):
        return bytes([flags]) + x + scales + group + reduce_op + out

    def rows_out(dtype, b, s, h):  # all_reduce keeps x's shape; reduce_scatter is (BS/R, H)
        return tensor(dtype, [b, s, h] if t == "quant_all_reduce" else [b * s, h])

    bs = 2
    write(t, "kg_int8_f32", call(tensor("i8", [bs, 256]), tensor("f32", [bs, 2]),
                                 tensor("f32", [bs, 256])))
    write(t, "kg_hif8_bf16_3d", call(tensor("hif8", [1, bs, 128], fill=1),
                                     tensor("f32", [1, bs, 1]), rows_out("bf16", 1, bs, 128)))
    write(t, "kg_e5m2_f16", call(tensor("e5m2", [bs, 128], fill=3), tensor("f32", [bs, 1]),
                                 tensor("f16", [bs, 128])))
    write(t, "mx_e4m3_bf16", call(tensor("e4m3", [bs, 128]), tensor("e8m0", [bs, 2, 2]),
                                  tensor("bf16", [bs, 128])))
    write(t, "mx_e5m2_f32_3d", call(tensor("e5m2", [2, 1, 64], fill=1),
                                    tensor("e8m0", [2, 1, 1, 2]), rows_out("f32", 2, 1, 64)))
    write(t, "bad_workspace_small", call(tensor("i8", [bs, 128]), tensor("f32", [bs, 1]),
                                         tensor("bf16", [bs, 128]), flags=1))
    write(t, "reject_h", call(tensor("i8", [bs, 100]), tensor("f32", [bs, 1]),
                              tensor("f32", [bs, 100])))
    write(t, "reject_null_x_data", call(tensor("i8", [bs, 128], null_data=True),
                                        tensor("f32", [bs, 1]), tensor("f32", [bs, 128])))


def convert():
    t = "convert"

    def call(src, dst, data, saturate=False, count=0, flags=0):
        return (dtype_code(src) + dtype_code(dst) + bytes([flags | (1 if saturate else 0)]) +
                struct.pack("<H", count) + data)

    f32 = lambda *v: struct.pack(f"<{len(v)}f", *v)
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
    write(t, "found_unknown_dtype_bits", call(195, "f32", b"\x00" * 8))  # unnamed message
    write(t, "found_negative_dtype", call("f32", -1, b"\x00" * 8))  # outside the enum
    write(t, "reject_data_movement", call("u8", "f32", b"\x00" * 8))
    write(t, "reject_null_src", call("f32", "f16", b"\x00" * 8, flags=4))
    write(t, "name_bf16", call("f32", "f32", b"bfloat16"))


def main():
    if ROOT.exists():
        shutil.rmtree(ROOT)
    all_gather_matmul()
    matmul_reducing("matmul_reduce_scatter")
    matmul_reducing("matmul_all_reduce")
    alltoall_quant_matmul()
    alltoall_matmul()
    quant_reducing("quant_all_reduce")
    quant_reducing("quant_reduce_scatter")
    convert()
    total = sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file())
    print(f"{sum(1 for f in ROOT.rglob('*') if f.is_file())} seeds, {total} bytes in {ROOT}")


if __name__ == "__main__":
    main()
