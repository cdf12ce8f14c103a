// commfuseQuantAllReduceGetWorkspaceSize / commfuseQuantAllReduce on decoded arguments, in the C
// prototype's order: x, scales, group, reduceOp, output (after the call-flags byte;
// fuzz/README.md).
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
  TensorArg x(r, Role::kInput), scales(r, Role::kInput);
  std::string group_bytes, reduce_op_bytes;
  const char* group = decode_group(r, group_bytes);
  const char* reduce_op = decode_reduce_op(r, reduce_op_bytes);
  TensorArg output(r, Role::kOutput);

  OpCall call;
  call.plan_fn = "commfuseQuantAllReduceGetWorkspaceSize";
  call.execute_fn = "commfuseQuantAllReduce";
  call.op = "quant_all_reduce";
  call.tensors = {&x, &scales, &output};
  call.work = x.numel();
  call.plan = [&](uint64_t* ws, commfuseOpExecutor_t** e) {
    return commfuseQuantAllReduceGetWorkspaceSize(x.get(), scales.get(), group, reduce_op,
                                                  output.get(), ws, e);
  };
  call.execute = commfuseQuantAllReduce;
  run_op(call, call_flags);
  return 0;
}
