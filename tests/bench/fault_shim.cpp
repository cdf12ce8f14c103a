// Fault injection for the benchmark tests (LD_PRELOAD): wraps exported libcommfuse symbols,
// calls the real one (found with dlsym(RTLD_NEXT)), then spoils its result, so that a test
// can see that `commfuse bench` reports the wrong result (#wrong, exit 1) instead of
// timing it. Nothing happens unless the test's environment asks:
//   CF_SHIM_AR / CF_SHIM_RS=1, CF_SHIM_ES=<element bytes>: Comm::all_reduce / reduce_scatter's
//     output set to 0xFF bytes (NaN in every float dtype)
//   CF_SHIM_SKIP_EXEC=1: Plan::execute returns without running the plan
//   CF_SHIM_FROM_ROW=<r>: quant_all_reduce's fp32 output rows r.. set to NaN
//   CF_SHIM_MPI_A2A=1: OpenMPI's MPI_Alltoall (the alltoall benches' plain MPI path) delivers
//     0xFF bytes (commfuse's own all_to_all never calls it)
#include <dlfcn.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "ops/quant_all_reduce/plan.hpp"

namespace {

long env_long(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atol(v) : 0;
}

template <typename F>
F real(const char* mangled) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, mangled));
}

void poison(void* dst, unsigned long count) {
  const long es = env_long("CF_SHIM_ES");
  if (es > 0) std::memset(dst, 0xFF, count * static_cast<unsigned long>(es));
}

using Collective = void (*)(void*, const void*, void*, unsigned long, int);
using Execute = void (*)(void*, void*, unsigned long);
using QuantExecute = void (*)(const commfuse::ops::QuantAllReducePlanData&, void*, size_t, void*);

}  // namespace

// The mangled names of commfuse::Comm::all_reduce / reduce_scatter(const void*, void*,
// uint64_t, DType), commfuse::Plan::execute(void*, size_t) and
// commfuse::ops::execute_plan<QuantAllReducePlanData>(const&, void*, size_t, void*).
extern "C" {

void _ZN8commfuse4Comm10all_reduceEPKvPvmNS_5DTypeE(void* self, const void* src, void* dst,
                                                    unsigned long count, int dtype) {
  static const auto f = real<Collective>("_ZN8commfuse4Comm10all_reduceEPKvPvmNS_5DTypeE");
  f(self, src, dst, count, dtype);
  if (env_long("CF_SHIM_AR") != 0) poison(dst, count);
}

void _ZN8commfuse4Comm14reduce_scatterEPKvPvmNS_5DTypeE(void* self, const void* src, void* dst,
                                                        unsigned long count, int dtype) {
  static const auto f = real<Collective>("_ZN8commfuse4Comm14reduce_scatterEPKvPvmNS_5DTypeE");
  f(self, src, dst, count, dtype);
  if (env_long("CF_SHIM_RS") != 0) poison(dst, count);
}

void _ZN8commfuse4Plan7executeEPvm(void* self, void* workspace, unsigned long bytes) {
  static const auto f = real<Execute>("_ZN8commfuse4Plan7executeEPvm");
  if (env_long("CF_SHIM_SKIP_EXEC") != 0) return;
  f(self, workspace, bytes);
}

void _ZN8commfuse3ops12execute_planINS0_22QuantAllReducePlanDataEEEvRKT_PvmS6_(
    const commfuse::ops::QuantAllReducePlanData& p, void* workspace, size_t bytes, void* stream) {
  static const auto f = real<QuantExecute>(
      "_ZN8commfuse3ops12execute_planINS0_22QuantAllReducePlanDataEEEvRKT_PvmS6_");
  f(p, workspace, bytes, stream);
  const char* from = std::getenv("CF_SHIM_FROM_ROW");
  if (from == nullptr || p.problem.out_dtype != commfuse::DType::kFloat32) return;
  float* out = static_cast<float*>(p.problem.output);
  for (int64_t r = std::atol(from); r < p.problem.rows; ++r)
    for (int64_t j = 0; j < p.problem.h; ++j) out[r * p.problem.h + j] = NAN;
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const int rc = PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  if (rc != MPI_SUCCESS || env_long("CF_SHIM_MPI_A2A") == 0) return rc;
  int size = 0, type_bytes = 0;
  MPI_Comm_size(comm, &size);
  MPI_Type_size(recvtype, &type_bytes);
  std::memset(recvbuf, 0xFF, static_cast<size_t>(size) * recvcount * type_bytes);
  return rc;
}

}  // extern "C"
