// commfuseAllGatherMatmulGetWorkspaceSize / commfuseAllGatherMatmul on decoded arguments.
// Input (fuzz/README.md): call flags; the problem m, k, n (usual 4, 16, 8) and dtype; group,
// gatherIndex, commTurn, streamMode; then the tensors x1 (m, k), x2 (k, n), bias (n,) (usual
// NULL), output (m·R, n) and gatherOut (m·R, k), each by default as a valid call has it.
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
  TensorArg x1(r, Role::kInput, {dt, {m, k}}), x2(r, Role::kInput, {dt, {k, n}}),
      bias(r, Role::kInput, {dt, {n}, false}), output(r, Role::kOutput, {dt, {m, n}}),
      gather_out(r, Role::kOutput, {dt, {m, k}});

  OpCall call;
  call.plan_fn = "commfuseAllGatherMatmulGetWorkspaceSize";
  call.execute_fn = "commfuseAllGatherMatmul";
  call.op = "all_gather_matmul";
  call.tensors = {&x1, &x2, &bias, &output, &gather_out};
  call.work = matmul_work(x1, x2);
  call.plan = [&](uint64_t* ws, commfuseOpExecutor_t** e) {
    return commfuseAllGatherMatmulGetWorkspaceSize(x1.get(), x2.get(), bias.get(), group,
                                                   gather_index, comm_turn, stream_mode,
                                                   output.get(), gather_out.get(), ws, e);
  };
  call.execute = commfuseAllGatherMatmul;
  run_op(call, call_flags);
  return 0;
}
