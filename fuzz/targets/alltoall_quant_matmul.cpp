// commfuseAlltoAllQuantMatmulGetWorkspaceSize / commfuseAlltoAllQuantMatmul on decoded
// arguments, in the C prototype's order: x1, x2, biasOptional, x1ScaleOptional, x2Scale,
// commScaleOptional, x1OffsetOptional, x2OffsetOptional, group, alltoAllAxesOptional,
// x1QuantMode, x2QuantMode, commQuantMode, commQuantDtype, x1QuantDtype, groupSize,
// transposeX1, transposeX2, output, alltoAllOutOptional (after the call-flags byte;
// fuzz/README.md). Zero bytes decode the modes to A16W8's (7, 2) and the reserved ones to
// their neutral values.
#include <commfuse/commfuse.h>

#include <string>

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
  constexpr Presence kOpt = Presence::kOptional;
  TensorArg x1(r, Role::kInput), x2(r, Role::kInput), bias(r, Role::kInput, kOpt),
      x1_scale(r, Role::kInput, kOpt), x2_scale(r, Role::kInput), comm_scale(r, Role::kInput, kOpt),
      x1_offset(r, Role::kInput, kOpt), x2_offset(r, Role::kInput, kOpt);
  std::string group_bytes;
  const char* group = decode_group(r, group_bytes);
  const IntArrayArg axes(r);
  const int64_t x1_quant_mode = decode_int(r, 7), x2_quant_mode = decode_int(r, 2),
                comm_quant_mode = decode_int(r, 0), comm_quant_dtype = decode_int(r, -1),
                x1_quant_dtype = decode_int(r, 2), group_size = decode_int(r, 0);
  const int transpose_x1 = decode_bool_int(r), transpose_x2 = decode_bool_int(r);
  TensorArg output(r, Role::kOutput), all_to_all_out(r, Role::kOutput, kOpt);

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
