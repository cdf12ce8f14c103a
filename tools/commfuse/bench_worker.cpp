// One rank of `commfuse bench <collective>`: for each size, times commfuse's collective and
// OpenMPI's equivalent in alternating rounds in the same process, checks commfuse's result
// (bitwise, against a locally computed reference and OpenMPI's result where it has one),
// and rank 0 prints nccl-tests' columns plus the MPI time and the ratio.
#include <mpi.h>

#include <commfuse/commfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_buffer.hpp"
#include "bench_json.hpp"
#include "bench_options.hpp"
#include "bench_quant.hpp"
#include "bench_timing.hpp"
#include "commands.hpp"
#include "core/error.hpp"

namespace commfuse::cli {
namespace {

struct Plan {
  uint64_t count;       // elements this rank sends (all-reduce: the buffer)
  uint64_t recv_count;  // elements this rank receives
  double bus_factor;    // nccl-tests busbw factor
};

Plan plan_for(const std::string& op, uint64_t bytes, size_t es, int R) {
  const uint64_t elems = std::max<uint64_t>(1, bytes / es);
  const double f = static_cast<double>(R - 1) / R;
  if (op == "all-reduce") return {elems, elems, 2 * f};
  const uint64_t per = std::max<uint64_t>(1, elems / static_cast<uint64_t>(R));
  if (op == "all-gather") return {per, per * R, f};
  if (op == "reduce-scatter") return {per * R, per, f};
  return {per * R, per * R, f};  // all-to-all: bytes sent per rank
}

MPI_Datatype mpi_sum_type(DType t) {
  switch (t) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt8:
      return MPI_INT8_T;
    default:
      return MPI_DATATYPE_NULL;  // no MPI type can sum fp16/bf16
  }
}

// Rank r's input element i: a small integer, so that every sum over ranks (|sum| <= 4 R) is
// exact in every dtype the check runs on and any rank can compute any rank's input.
int input_value(int r, uint64_t i) {
  return static_cast<int>((static_cast<uint64_t>(r) * 7 + i) % 9) - 4;
}

// What this rank's receive buffer must hold, computed locally from every rank's input (the
// reference for every dtype: OpenMPI cannot sum fp16/bf16, so its result alone would leave
// those unchecked).
std::vector<float> expected_output(const std::string& op, const Plan& p, int rank, int R) {
  std::vector<float> want(p.recv_count);
  for (uint64_t j = 0; j < p.recv_count; ++j) {
    int v = 0;
    if (op == "all-reduce" || op == "reduce-scatter") {
      const uint64_t i = op == "all-reduce" ? j : static_cast<uint64_t>(rank) * p.recv_count + j;
      for (int r = 0; r < R; ++r) v += input_value(r, i);
    } else if (op == "all-gather") {
      v = input_value(static_cast<int>(j / p.count), j % p.count);
    } else {  // all-to-all: block s came from rank s, its block for this rank
      const uint64_t per = p.count / static_cast<uint64_t>(R);
      v = input_value(static_cast<int>(j / per), static_cast<uint64_t>(rank) * per + j % per);
    }
    want[j] = static_cast<float>(v);
  }
  return want;
}

}  // namespace

int cmd_bench_worker(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0, R = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &R);
  int rc = 0;
  try {
    const BenchOptions o =
        parse_bench_options(std::vector<std::string>(argv + 1, argv + argc), /*internal=*/true);
    if (o.family == kQuantReduce) {  // bench_quant.cpp
      rc = run_quant_bench(rank, R, o);
      MPI_Finalize();
      return rc;
    }
    const DType t = dtype_from_name(o.dtype);
    const size_t es = static_cast<size_t>(dtype_bits(t) / 8);
    CF_CHECK_ARG(es >= 1, "bench: dtype ", o.dtype, " is sub-byte");
    const std::string init =
        o.transport == "mpi" ? std::string("mpi") : "tcp://127.0.0.1:" + std::to_string(o.port);
    Comm comm(rank, R, init);
    // All-to-all, then (quantized) matmul: bench_alltoall.cpp.
    if (o.family & (kAlltoAllQuantMatmul | kAlltoAllMatmul)) {
      rc = bench_alltoall(o, comm);
      MPI_Finalize();
      return rc;
    }
    JsonRows json_rows(rank == 0 ? o.json : std::string());
    JsonRows* const json = json_rows.enabled() ? &json_rows : nullptr;
    if (o.family == kFusedMatmul) {
      rc = run_fused_bench(o, comm, json);
      MPI_Finalize();
      return rc;
    }
    if (rank == 0) {
      std::printf(
          "# commfuse bench %s: %d ranks, transport %s (%s), dtype %s, median of %d rounds\n",
          o.op.c_str(), R, comm.transport_name(),
          o.transport == "mpi" ? "MPI over TCP" : "shared memory", o.dtype.c_str(), o.rounds);
      std::printf("# baseline: OpenMPI %s in the same processes (%s)\n",
                  o.op == "all-reduce"       ? "MPI_Allreduce"
                  : o.op == "all-gather"     ? "MPI_Allgather"
                  : o.op == "reduce-scatter" ? "MPI_Reduce_scatter_block"
                                             : "MPI_Alltoall",
                  o.transport == "mpi" ? "btl tcp,self" : "default btl: shared memory");
      std::printf("%12s %12s %9s %12s %10s %10s %7s %12s %9s\n", "size(B)", "count", "type",
                  "time(us)", "algbw", "busbw", "#wrong", "mpi(us)", "mpi/cf");
    }
    uint64_t last_count = ~uint64_t{0};
    for (const uint64_t bytes : sweep_sizes(o)) {
      const Plan p = plan_for(o.op, bytes, es, R);
      if (p.count == last_count) continue;  // rounded to the row just measured
      last_count = p.count;
      // Small integers: every sum is exact, so the check is bitwise.
      std::vector<float> init_vals(p.count);
      for (uint64_t i = 0; i < p.count; ++i)
        init_vals[i] = static_cast<float>(input_value(rank, i));
      Bytes src(p.count * es), dst(p.recv_count * es), mpi_dst(p.recv_count * es);
      convert(init_vals.data(), DType::kFloat32, src.data(), t, p.count);

      std::function<void()> cf, mpi;
      const MPI_Datatype mt = mpi_sum_type(t);
      if (o.op == "all-reduce") {
        cf = [&] { comm.all_reduce(src.data(), dst.data(), p.count, t); };
        if (mt != MPI_DATATYPE_NULL)
          mpi = [&] {
            MPI_Allreduce(src.data(), mpi_dst.data(), static_cast<int>(p.count), mt, MPI_SUM,
                          MPI_COMM_WORLD);
          };
      } else if (o.op == "all-gather") {
        cf = [&] { comm.all_gather(src.data(), dst.data(), p.count, t); };
        mpi = [&] {
          MPI_Allgather(src.data(), static_cast<int>(p.count * es), MPI_BYTE, mpi_dst.data(),
                        static_cast<int>(p.count * es), MPI_BYTE, MPI_COMM_WORLD);
        };
      } else if (o.op == "reduce-scatter") {
        cf = [&] { comm.reduce_scatter(src.data(), dst.data(), p.recv_count, t); };
        if (mt != MPI_DATATYPE_NULL)
          mpi = [&] {
            MPI_Reduce_scatter_block(src.data(), mpi_dst.data(), static_cast<int>(p.recv_count), mt,
                                     MPI_SUM, MPI_COMM_WORLD);
          };
      } else {
        const uint64_t per = p.count / R;
        cf = [&] { comm.all_to_all(src.data(), dst.data(), per, t); };
        mpi = [&] {
          MPI_Alltoall(src.data(), static_cast<int>(per * es), MPI_BYTE, mpi_dst.data(),
                       static_cast<int>(per * es), MPI_BYTE, MPI_COMM_WORLD);
        };
      }
      const int iters = o.iters > 0
                            ? o.iters
                            : static_cast<int>(std::clamp<uint64_t>(
                                  (uint64_t{256} << 20) / std::max<uint64_t>(bytes, 1), 5, 2000));
      // Warm-up scales with the iteration count (page faults, caches, both libraries' lazy
      // set-up), the same for commfuse and MPI.
      const int warmup = o.warmup + std::min(iters / 10, 50);
      for (int i = 0; i < warmup; ++i) {
        cf();
        if (mpi) mpi();
      }
      std::vector<double> cf_t, mpi_t;
      for (int r = 0; r < o.rounds; ++r) {
        cf_t.push_back(time_us(cf, iters));
        if (mpi) mpi_t.push_back(time_us(mpi, iters));
      }
      // Check commfuse's last result bitwise against the local reference (every dtype), and
      // against MPI's where MPI can compute it; an element counts once if either differs.
      const std::vector<float> want = expected_output(o.op, p, rank, R);
      Bytes ref(p.recv_count * es);
      convert(want.data(), DType::kFloat32, ref.data(), t, p.recv_count);
      uint64_t wrong = 0;
      for (uint64_t i = 0; i < p.recv_count * es; i += es)
        wrong += std::memcmp(dst.data() + i, ref.data() + i, es) != 0 ||
                 (mpi && std::memcmp(dst.data() + i, mpi_dst.data() + i, es) != 0);
      uint64_t total_wrong = 0;
      MPI_Allreduce(&wrong, &total_wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
      const double cf_us = mean_over_ranks(median(cf_t), R);
      const double mpi_us = mpi ? mean_over_ranks(median(mpi_t), R) : 0;
      if (rank == 0) {
        const double sz =
            static_cast<double>(o.op == "all-gather" ? p.recv_count * es : p.count * es);
        const double algbw = sz / cf_us / 1e3;  // GB/s, GB = 1e9
        const unsigned long long cnt = o.op == "all-gather" ? p.recv_count : p.count;
        std::printf("%12.0f %12llu %9s %12.1f %10.2f %10.2f %7llu ", sz, cnt, o.dtype.c_str(),
                    cf_us, algbw, algbw * p.bus_factor,
                    static_cast<unsigned long long>(total_wrong));
        if (mpi)
          std::printf("%12.1f %9.2f\n", mpi_us, mpi_us / cf_us);
        else
          std::printf("%12s %9s\n", "n/a", "n/a");
        std::fflush(stdout);
        if (json)
          json->row(
              "{\"op\":\"%s\",\"transport\":\"%s\",\"world_size\":%d,\"dtype\":\"%s\","
              "\"bytes\":%.0f,\"count\":%llu,\"commfuse_us\":%.3f,\"mpi_us\":%s,"
              "\"algbw_gbs\":%.4f,\"busbw_gbs\":%.4f,\"wrong\":%llu}\n",
              o.op.c_str(), o.transport.c_str(), R, o.dtype.c_str(), sz, cnt, cf_us,
              mpi ? std::to_string(mpi_us).c_str() : "null", algbw, algbw * p.bus_factor,
              static_cast<unsigned long long>(total_wrong));
      }
      if (total_wrong != 0) rc = 1;
    }
  } catch (const std::exception& e) {  // commfuse::Error, or UsageError from the parent's args
    std::fprintf(stderr, "commfuse bench-worker (rank %d): %s\n", rank, e.what());
    rc = 1;
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}

}  // namespace commfuse::cli
