// commfuseAllGatherMatmul[V2]GetWorkspaceSize / commfuseAllGatherMatmul[V2] on decoded
// arguments. Input (fuzz/README.md): call flags (bits 4-6: the V2 / SPEC §6 form,
// support/decode.hpp matmul_mode); the problem m, k, n (usual 4, 16, 8) and dtype; group,
// gatherIndex, commTurn, streamMode; then the tensors x1 (m, k), x2 (k, n), bias (n,) (usual
// NULL), output (m·R, n), gatherOut (m·R, k), x1Scale and x2Scale (usual NULL outside the
// quantized forms), each by default as a valid call has it.
#include <commfuse/commfuse.h>

#include <string>

#include "support/decode.hpp"
#include "support/fuzz_comm.hpp"
#include "support/op_runner.hpp"

using namespace commfuse_fuzz;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  init_fuzz_comm();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  const uint8_t call_flags = r.u8();
  const int64_t m = decode_size(r, 4), k = decode_size(r, 16), n = decode_size(r, 8);
  const commfuseDataType dt = decode_float_dtype(r);
  std::string group_bytes;
  const char* group = decode_group(r, group_bytes);
  const int64_t gather_index = decode_int(r, 0), comm_turn = decode_int(r, 0),
                stream_mode = decode_int(r, 1);
  const MatmulMode mm = matmul_mode(call_flags, dt, /*int32_bias_ok=*/true);
  TensorArg x1(r, Role::kInput, {mm.a, {m, k}}), x2(r, Role::kInput, {mm.b, {k, n}}),
      bias(r, Role::kInput, {mm.bias, {n}, mm.bias_present}),
      output(r, Role::kOutput, {mm.out, {m, n}}), gather_out(r, Role::kOutput, {mm.a, {m, k}});
  TensorArg x1_scale(r, Role::kInput, {COMMFUSE_FLOAT32, {mm.per_token ? m : 1}, mm.quant}),
      x2_scale(r, Role::kInput, {COMMFUSE_FLOAT32, {n}, mm.quant});

  OpCall call;
  call.plan_fn = mm.v2 ? "commfuseAllGatherMatmulV2GetWorkspaceSize"
                       : "commfuseAllGatherMatmulGetWorkspaceSize";
  call.execute_fn = mm.v2 ? "commfuseAllGatherMatmulV2" : "commfuseAllGatherMatmul";
  call.op = "all_gather_matmul";
  call.tensors = {&x1, &x2, &bias, &output, &gather_out, &x1_scale, &x2_scale};
  call.work = matmul_work(x1, x2);
  call.plan = [&](uint64_t* ws, commfuseOpExecutor_t** e) {
    if (mm.v2)
      return commfuseAllGatherMatmulV2GetWorkspaceSize(
          x1.get(), x2.get(), bias.get(), x1_scale.get(), x2_scale.get(), group, gather_index,
          comm_turn, stream_mode, output.get(), gather_out.get(), ws, e);
    return commfuseAllGatherMatmulGetWorkspaceSize(x1.get(), x2.get(), bias.get(), group,
                                                   gather_index, comm_turn, stream_mode,
                                                   output.get(), gather_out.get(), ws, e);
  };
  call.execute = mm.v2 ? commfuseAllGatherMatmulV2 : commfuseAllGatherMatmul;
  run_op(call, call_flags);
  return 0;
}
