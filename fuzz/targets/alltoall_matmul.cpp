// commfuseAlltoAllMatmulGetWorkspaceSize / commfuseAlltoAllMatmul on decoded arguments, in
// the C prototype's order: x1, x2, biasOptional, group, alltoAllAxesOptional, transposeX1,
// transposeX2, output, alltoAllOutOptional (after the call-flags byte; fuzz/README.md).
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
  TensorArg x1(r, Role::kInput), x2(r, Role::kInput), bias(r, Role::kInput, Presence::kOptional);
  std::string group_bytes;
  const char* group = decode_group(r, group_bytes);
  const IntArrayArg axes(r);
  const int transpose_x1 = decode_bool_int(r), transpose_x2 = decode_bool_int(r);
  TensorArg output(r, Role::kOutput), all_to_all_out(r, Role::kOutput, Presence::kOptional);

  OpCall call;
  call.plan_fn = "commfuseAlltoAllMatmulGetWorkspaceSize";
  call.execute_fn = "commfuseAlltoAllMatmul";
  call.op = "alltoall_matmul";
  call.tensors = {&x1, &x2, &bias, &output, &all_to_all_out};
  call.work = matmul_work(x1, x2);
  call.plan = [&](uint64_t* ws, commfuseOpExecutor_t** e) {
    return commfuseAlltoAllMatmulGetWorkspaceSize(x1.get(), x2.get(), bias.get(), group, axes.get(),
                                                  transpose_x1, transpose_x2, output.get(),
                                                  all_to_all_out.get(), ws, e);
  };
  call.execute = commfuseAlltoAllMatmul;
  run_op(call, call_flags);
  return 0;
}
