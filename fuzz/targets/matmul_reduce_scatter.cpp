// commfuseMatmulReduceScatterGetWorkspaceSize / commfuseMatmulReduceScatter on decoded arguments,
// in the C prototype's order: x1, x2, bias, group, reduceOp, commTurn, streamMode, output (after
// the call-flags byte; fuzz/README.md).
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
  TensorArg x1(r, Role::kInput), x2(r, Role::kInput), bias(r, Role::kInput, Presence::kOptional);
  std::string group_bytes, reduce_op_bytes;
  const char* group = decode_group(r, group_bytes);
  const char* reduce_op = decode_reduce_op(r, reduce_op_bytes);
  const int64_t comm_turn = decode_int(r, 0), stream_mode = decode_int(r, 1);
  TensorArg output(r, Role::kOutput);

  OpCall call;
  call.plan_fn = "commfuseMatmulReduceScatterGetWorkspaceSize";
  call.execute_fn = "commfuseMatmulReduceScatter";
  call.op = "matmul_reduce_scatter";
  call.tensors = {&x1, &x2, &bias, &output};
  call.work = matmul_work(x1, x2);
  call.plan = [&](uint64_t* ws, commfuseOpExecutor_t** e) {
    return commfuseMatmulReduceScatterGetWorkspaceSize(x1.get(), x2.get(), bias.get(), group,
                                                       reduce_op, comm_turn, stream_mode,
                                                       output.get(), ws, e);
  };
  call.execute = commfuseMatmulReduceScatter;
  run_op(call, call_flags);
  return 0;
}
