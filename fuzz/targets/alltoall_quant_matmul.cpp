// commfuseAlltoAllQuantMatmulGetWorkspaceSize / commfuseAlltoAllQuantMatmul on decoded
// arguments. Input (fuzz/README.md): call flags; the problem: a combination byte (mod 3:
// A16W8, A16W4, A4W4; then fp16 or bf16 for the float side), BS, H, N (usual 2, 8, 6);
// group, alltoAllAxesOptional, x1QuantMode, x2QuantMode, commQuantMode, commQuantDtype,
// x1QuantDtype, groupSize, transposeX1, transposeX2 (usual: the combination's modes and the
// reserved values); then the tensors x1, x2, biasOptional, x1ScaleOptional, x2Scale,
// commScaleOptional, x1OffsetOptional, x2OffsetOptional, output, alltoAllOutOptional, each
// by default as a valid call of the combination has it (SPEC §3).
#include <commfuse/commfuse.h>

#include <string>
#include <vector>

#include "support/decode.hpp"
#include "support/fuzz_comm.hpp"
#include "support/int_array_arg.hpp"
#include "support/op_runner.hpp"

using namespace commfuse_fuzz;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  init_fuzz_comm();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  const uint8_t call_flags = r.u8();
  const uint8_t combo = r.u8();
  const bool a4w4 = combo % 3 == 2, w4 = combo % 3 != 0;
  const commfuseDataType fdt = combo / 3 % 2 ? COMMFUSE_BFLOAT16 : COMMFUSE_FLOAT16;
  const commfuseDataType x1_dt = a4w4 ? COMMFUSE_INT4 : fdt;
  const commfuseDataType x2_dt = w4 ? COMMFUSE_INT4 : COMMFUSE_INT8;
  const int64_t bs = decode_size(r, 2), h = decode_size(r, 8), n = decode_size(r, 6);
  std::string group_bytes;
  const char* group = decode_group(r, group_bytes);
  const IntArrayArg axes(r);
  const int64_t x1_quant_mode = decode_int(r, a4w4 ? 3 : 7), x2_quant_mode = decode_int(r, 2),
                comm_quant_mode = decode_int(r, 0), comm_quant_dtype = decode_int(r, -1),
                x1_quant_dtype = decode_int(r, 2), group_size = decode_int(r, 0);
  const int transpose_x1 = decode_bool_int(r), transpose_x2 = decode_bool_int(r);
  constexpr commfuseDataType kF32 = COMMFUSE_FLOAT32;
  // A4W4's per-token scale (BS,) is required; A16's smooth scale (H,) optional.
  const Canonical x1_scale_usual = a4w4 ? Canonical{kF32, {bs}} : Canonical{fdt, {h}, false};
  TensorArg x1(r, Role::kInput, {x1_dt, {bs, h}}),
      x2(r, Role::kInput,
         {x2_dt, transpose_x2 ? std::vector<int64_t>{n, h} : std::vector<int64_t>{h, n}}),
      bias(r, Role::kInput, {kF32, {n}, false}), x1_scale(r, Role::kInput, x1_scale_usual),
      x2_scale(r, Role::kInput, {kF32, {n}}), comm_scale(r, Role::kInput, {kF32, {n}, false}),
      x1_offset(r, Role::kInput, {kF32, {n}, false}),
      x2_offset(r, Role::kInput, {kF32, {n}, false}), output(r, Role::kOutput, {fdt, {bs, n}}),
      all_to_all_out(r, Role::kOutput, {x1_dt, {bs, h}, false});

  OpCall call;
  call.plan_fn = "commfuseAlltoAllQuantMatmulGetWorkspaceSize";
  call.execute_fn = "commfuseAlltoAllQuantMatmul";
  call.op = "alltoall_quant_matmul";
  call.tensors = {&x1,         &x2,        &bias,      &x1_scale, &x2_scale,
                  &comm_scale, &x1_offset, &x2_offset, &output,   &all_to_all_out};
  call.work = matmul_work(x1, x2);
  call.plan = [&](uint64_t* ws, commfuseOpExecutor_t** e) {
    return commfuseAlltoAllQuantMatmulGetWorkspaceSize(
        x1.get(), x2.get(), bias.get(), x1_scale.get(), x2_scale.get(), comm_scale.get(),
        x1_offset.get(), x2_offset.get(), group, axes.get(), x1_quant_mode, x2_quant_mode,
        comm_quant_mode, comm_quant_dtype, x1_quant_dtype, group_size, transpose_x1, transpose_x2,
        output.get(), all_to_all_out.get(), ws, e);
  };
  call.execute = commfuseAlltoAllQuantMatmul;
  run_op(call, call_flags);
  return 0;
}
