// The inside of a matmul plan: the oneDNN primitive chosen for a descriptor and how its
// operands are fed to it. Shared by matmul_plan.cpp (creation, cache) and matmul.cpp
// (execution) only.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/packed_b.hpp"

namespace commfuse::kernels::cpu {

// A number no other plan of this process has (plan identity for per-thread caches, which
// must not mistake a new plan at a freed plan's address for the old one).
uint64_t next_plan_serial();

class MatmulPlan {
 public:
  uint64_t serial = next_plan_serial();
  MatmulDesc desc;
  int threads = 1;  // OpenMP threads at creation; execution uses the same number
  // fp16/bf16 a and b are widened to dense fp32 scratch and multiplied in fp32; when c is
  // fp16/bf16 the fp32 result goes to scratch and is rounded once into c.
  bool widened = false;
  std::string widen_reason;  // why (no native kernel, or the machine model), when widened
  // The primitive takes a fp32 bias but the caller's bias is fp16/bf16: it is widened
  // (n values) on every call.
  bool bias_to_f32 = false;
  // Few rows of fp16/bf16 without a native kernel: small_m_gemm.hpp's direct kernel reads
  // the 16-bit operands in place; no oneDNN primitive.
  bool small_m = false;
  // fp32 on OpenBLAS's sgemm (f32_gemm_model.hpp); no oneDNN primitive.
  bool openblas = false;
  // More rows than one oneDNN call takes (kMaxCallElements): the plan of a full chunk of
  // `chunk_rows` rows; execution runs the rows chunk by chunk (the tail through
  // plan_matmul). Null otherwise.
  std::shared_ptr<const MatmulPlan> chunk;
  int64_t chunk_rows = 0;
  // desc.b_packed and the primitive reads b in this layout (packed_b.hpp); b_md is it.
  std::optional<PackedLayout> packed;
  dnnl::matmul primitive;  // empty when m == 0 or chunked
  // The primitive's operand descriptors, kept so a call wraps buffers without querying.
  dnnl::memory::desc a_md, b_md, c_md, bias_md, scratchpad_md;
  std::string impl;  // oneDNN's impl_info_str(), e.g. "gemm:jit"
};

// The engine every plan is created on, and executed with.
const dnnl::engine& cpu_engine();

// Every commfuse primitive is created with a user scratchpad (scratchpad_attr()) and given
// scratchpad_buffer() at execution (by thread_args): a buffer of the calling thread that only
// grows. With oneDNN's own
// ("library") scratchpad a primitive owns one buffer, allocated when it is created — a
// GetWorkspaceSize call on a huge shape allocated tens of GiB — and shared by every thread
// executing it, so two threads running one plan raced on it (a bf16 brgemm's reordered b:
// wrong sums in MatmulTyped.SamePlanFromManyThreads).
dnnl::primitive_attr scratchpad_attr();
// The calling thread's scratchpad buffer, grown to at least `bytes` (it only grows, so the
// pointer changes only when a larger scratchpad is asked for).
void* scratchpad_buffer(size_t bytes);

// A primitive's execution arguments for the calling thread, pointed at this call's buffers
// (and the thread's scratchpad). The memory objects and their map are kept per thread for
// the last few plans (identified by address and serial) and re-pointed on a repeated call:
// creating four or five memory objects and a hash map cost more than a tiny GEMM itself
// (2 x 256 x 256 bf16: 9.9 us a call with them, 7.8 us without). Per thread, so a plan
// shared by threads never shares argument objects.
struct PlanKey {
  const void* plan;
  uint64_t serial;
};
struct Operand {
  const dnnl::memory::desc& md;
  const void* data;  // oneDNN takes non-const handles; it only writes DST
};
const std::unordered_map<int, dnnl::memory>& thread_args(PlanKey key, Operand a, Operand b,
                                                         Operand c,
                                                         const dnnl::memory::desc* bias_md,
                                                         const void* bias,
                                                         const dnnl::memory::desc& scratchpad_md);

}  // namespace commfuse::kernels::cpu
