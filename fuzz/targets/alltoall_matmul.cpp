// commfuseAlltoAllMatmulGetWorkspaceSize / commfuseAlltoAllMatmul on decoded arguments.
// Input (fuzz/README.md): call flags; the problem BS, H, N (usual 3, 8, 5) and dtype; group,
// alltoAllAxesOptional, transposeX1, transposeX2; then the tensors x1 (BS, H), x2 (H, N) or
// with transposeX2 (N, H), biasOptional (N,) (usual NULL), output (BS/R, N) and
// alltoAllOutOptional (BS/R, R·H) (usual NULL), each by default as a valid call has it.
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
  const int64_t bs = decode_size(r, 3), h = decode_size(r, 8), n = decode_size(r, 5);
  const commfuseDataType dt = decode_float_dtype(r);
  std::string group_bytes;
  const char* group = decode_group(r, group_bytes);
  const IntArrayArg axes(r);
  const int transpose_x1 = decode_bool_int(r), transpose_x2 = decode_bool_int(r);
  TensorArg x1(r, Role::kInput, {dt, {bs, h}}),
      x2(r, Role::kInput, {dt, transpose_x2 ? std::vector<int64_t>{n, h} : std::vector{h, n}}),
      bias(r, Role::kInput, {dt, {n}, false}), output(r, Role::kOutput, {dt, {bs, n}}),
      all_to_all_out(r, Role::kOutput, {dt, {bs, h}, false});

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
