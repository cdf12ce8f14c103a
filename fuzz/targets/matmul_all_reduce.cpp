// commfuseMatmulAllReduce[V2]GetWorkspaceSize / commfuseMatmulAllReduce[V2] on decoded arguments.
// Input (fuzz/README.md): call flags; the problem m, k, n, batch (usual 4, 16, 8, 0) and dtype;
// group, reduceOp, commTurn, streamMode; then the tensors x1 (m, k) or, with a batch b > 0, (b, m,
// k), x2 (k, n), bias (n,) (usual NULL) and output (x1's leading dims, n), each by default as a
// valid call has it.
// Then x1Scale and x2Scale (usual NULL outside the quantized forms, which bits 4-6 of the
// call flags choose: support/decode.hpp matmul_mode).
#include <commfuse/commfuse.h>

#include <string>
#include <vector>

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
  const int64_t m = decode_size(r, 4), k = decode_size(r, 16), n = decode_size(r, 8),
                batch = decode_size(r, 0);
  const commfuseDataType dt = decode_float_dtype(r);
  // A batch gives the (b, s, k) form SPEC §2 allows.
  const std::vector<int64_t> x1_shape =
      batch > 0 ? std::vector<int64_t>{batch, m, k} : std::vector<int64_t>{m, k};
  const std::vector<int64_t> out_shape =
      batch > 0 ? std::vector<int64_t>{batch, m, n} : std::vector<int64_t>{m, n};
  std::string group_bytes, reduce_op_bytes;
  const char* group = decode_group(r, group_bytes);
  const char* reduce_op = decode_reduce_op(r, reduce_op_bytes);
  const int64_t comm_turn = decode_int(r, 0), stream_mode = decode_int(r, 1);
  const MatmulMode mm = matmul_mode(call_flags, dt, /*int32_bias_ok=*/false);
  int64_t x1_rows = m;  // the per-token scale's length: all of x1's rows
  if (batch > 0 && __builtin_mul_overflow(batch, m, &x1_rows)) x1_rows = 1;
  TensorArg x1(r, Role::kInput, {mm.a, x1_shape}), x2(r, Role::kInput, {mm.b, {k, n}}),
      bias(r, Role::kInput, {mm.bias, {n}, mm.bias_present}),
      output(r, Role::kOutput, {mm.out, out_shape});
  TensorArg x1_scale(r, Role::kInput, {COMMFUSE_FLOAT32, {mm.per_token ? x1_rows : 1}, mm.quant}),
      x2_scale(r, Role::kInput, {COMMFUSE_FLOAT32, {n}, mm.quant});

  OpCall call;
  call.plan_fn = mm.v2 ? "commfuseMatmulAllReduceV2GetWorkspaceSize"
                       : "commfuseMatmulAllReduceGetWorkspaceSize";
  call.execute_fn = mm.v2 ? "commfuseMatmulAllReduceV2" : "commfuseMatmulAllReduce";
  call.op = "matmul_all_reduce";
  call.tensors = {&x1, &x2, &bias, &output, &x1_scale, &x2_scale};
  call.work = matmul_work(x1, x2);
  call.plan = [&](uint64_t* ws, commfuseOpExecutor_t** e) {
    if (mm.v2)
      return commfuseMatmulAllReduceV2GetWorkspaceSize(
          x1.get(), x2.get(), bias.get(), x1_scale.get(), x2_scale.get(), group, reduce_op,
          comm_turn, stream_mode, output.get(), ws, e);
    return commfuseMatmulAllReduceGetWorkspaceSize(x1.get(), x2.get(), bias.get(), group, reduce_op,
                                                   comm_turn, stream_mode, output.get(), ws, e);
  };
  call.execute = mm.v2 ? commfuseMatmulAllReduceV2 : commfuseMatmulAllReduce;
  run_op(call, call_flags);
  return 0;
}
