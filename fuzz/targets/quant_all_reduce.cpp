// commfuseQuantAllReduceGetWorkspaceSize / commfuseQuantAllReduce on decoded arguments.
// Input (fuzz/README.md): call flags; the problem (quant_problem.hpp: format, output dtype,
// bs, H, batch); group, reduceOp; then the tensors x, scales and output (x's shape),
// each by default as a valid call has it.
#include <commfuse/commfuse.h>

#include <string>

#include "support/decode.hpp"
#include "support/fuzz_comm.hpp"
#include "support/op_runner.hpp"
#include "support/quant_problem.hpp"

using namespace commfuse_fuzz;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  init_fuzz_comm();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  const uint8_t call_flags = r.u8();
  const QuantProblem p(r);
  std::string group_bytes, reduce_op_bytes;
  const char* group = decode_group(r, group_bytes);
  const char* reduce_op = decode_reduce_op(r, reduce_op_bytes);
  TensorArg x(r, Role::kInput, {p.x_dtype, p.x_shape}),
      scales(r, Role::kInput, {p.scale_dtype, p.scale_shape}),
      output(r, Role::kOutput, {p.out_dtype, p.x_shape});

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
