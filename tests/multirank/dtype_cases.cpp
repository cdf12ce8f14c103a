// The data-movement dtypes (uint8, int16, uint16, bool): broadcast, all_gather and
// all_to_all move them bitwise on every transport, and every sum rejects them on the
// calling rank (PARAM_INVALID naming the op, the rank and the dtype), in C++ and in C.
#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "another_comm.hpp"

using commfuse::DType;

namespace {

int g_dtype_failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++g_dtype_failures;
  std::fprintf(stderr, "FAILED dtypes: %s\n", what.c_str());
}

const DType kMoveOnly[] = {DType::kUInt8, DType::kInt16, DType::kUInt16, DType::kBool};

// Bytes of `count` elements owned by (rank, block): every bit pattern of the integer types
// occurs; bool holds 0/1 as numpy and torch store it.
std::vector<uint8_t> payload(DType t, int rank, int block, size_t count) {
  std::vector<uint8_t> b(commfuse::dtype_storage_bytes(t, count));
  for (size_t i = 0; i < b.size(); ++i) {
    const auto v = static_cast<uint8_t>((rank * 151 + block * 89 + i * 29 + i / 253) & 0xFF);
    b[i] = t == DType::kBool ? static_cast<uint8_t>(v & 1) : v;
  }
  return b;
}

std::string name(DType t) {
  return std::string(commfuse::dtype_name(t));
}

bool same_block(const std::vector<uint8_t>& all, size_t block, const std::vector<uint8_t>& want) {
  return want.empty() ||
         std::memcmp(all.data() + block * want.size(), want.data(), want.size()) == 0;
}

// Calls fn, which must throw InvalidArgument whose message names op, this rank and dtype.
template <typename Fn>
void expect_sum_rejected(Fn&& fn, const std::string& op, int rank, DType t) {
  const std::string what = op + " " + name(t);
  try {
    fn();
    expect(false, what + ": no error");
  } catch (const commfuse::InvalidArgument& e) {
    const std::string m = e.what();
    const std::string head = op + "(rank " + std::to_string(rank) + "): dtype " + name(t);
    expect(e.code() == commfuse::Status::kParamInvalid, what + ": code");
    expect(m.find(head) == 0 && m.find("cannot be summed (only float32") != std::string::npos,
           what + ": message '" + m + "'");
  } catch (const commfuse::Error& e) {
    expect(false,
           what + ": wrong error " + std::to_string(static_cast<int>(e.code())) + ": " + e.what());
  }
}

void expect_c_rejected(commfuseStatus_t st, const char* op, int rank, commfuseDataType t) {
  const std::string m = commfuseGetLastErrorMessage();
  const std::string head =
      std::string(op) + "(rank " + std::to_string(rank) + "): dtype " + commfuseDataTypeName(t);
  expect(st == COMMFUSE_PARAM_INVALID, head + ": status " + std::to_string(st));
  expect(m.find(head) != std::string::npos && m.find("cannot be summed") != std::string::npos,
         head + ": message '" + m + "'");
}

// Data movement through the C API, then every sum rejected with PARAM_INVALID (161002).
void c_api_cases(commfuse::Comm& c) {
  const int rank = c.rank(), size = c.world_size();
  commfuseComm_t comm = nullptr;
  const std::string init = multirank::another_init_method(c);
  const commfuseStatus_t st = commfuseCommInitRank(rank, size, init.c_str(), &comm);
  expect(st == COMMFUSE_SUCCESS, std::string("C init: ") + commfuseGetLastErrorMessage());
  if (comm == nullptr) return;
  const commfuseDataType types[] = {COMMFUSE_UINT8, COMMFUSE_INT16, COMMFUSE_UINT16, COMMFUSE_BOOL};
  const size_t n = 33;
  for (commfuseDataType ct : types) {
    const auto t = static_cast<DType>(ct);
    auto src = payload(t, rank, 0, n);
    std::vector<uint8_t> dst(src.size() * size, 0xCD);
    expect(commfuseAllGather(src.data(), dst.data(), n, ct, comm) == COMMFUSE_SUCCESS,
           "C all_gather " + name(t) + ": " + commfuseGetLastErrorMessage());
    for (int s = 0; s < size; ++s)
      expect(same_block(dst, s, payload(t, s, 0, n)), "C all_gather " + name(t));
    auto buf = payload(t, rank, 1, n);
    expect(commfuseBroadcast(buf.data(), n, ct, size - 1, comm) == COMMFUSE_SUCCESS,
           "C broadcast " + name(t) + ": " + commfuseGetLastErrorMessage());
    expect(buf == payload(t, size - 1, 1, n), "C broadcast " + name(t));
    std::vector<uint8_t> a2a_in, a2a_out(src.size() * size, 0xCD);
    for (int s = 0; s < size; ++s) {
      auto b = payload(t, rank, 10 + s, n);
      a2a_in.insert(a2a_in.end(), b.begin(), b.end());
    }
    expect(commfuseAllToAll(a2a_in.data(), a2a_out.data(), n, ct, comm) == COMMFUSE_SUCCESS,
           "C all_to_all " + name(t) + ": " + commfuseGetLastErrorMessage());
    for (int s = 0; s < size; ++s)
      expect(same_block(a2a_out, s, payload(t, s, 10 + rank, n)), "C all_to_all " + name(t));
  }
  for (commfuseDataType ct : types) {
    std::vector<uint8_t> src(4 * size * n), dst(4 * size * n);
    expect_c_rejected(commfuseAllReduce(src.data(), dst.data(), n, ct, comm), "all_reduce", rank,
                      ct);
    expect_c_rejected(commfuseReduceScatter(src.data(), dst.data(), n, ct, comm), "reduce_scatter",
                      rank, ct);
  }
  expect(commfuseCommDestroy(comm) == COMMFUSE_SUCCESS, "C destroy");
}

}  // namespace

// Every rank checks broadcast (from every root), all_gather and all_to_all of n elements of
// each data-movement dtype bitwise. Returns the number of failed checks.
int check_move_dtypes(commfuse::Comm& c, size_t n) {
  g_dtype_failures = 0;
  const int R = c.world_size(), me = c.rank();
  for (DType t : kMoveOnly) {
    const std::string what = name(t) + " n=" + std::to_string(n);
    {
      auto src = payload(t, me, 0, n);
      std::vector<uint8_t> dst(src.size() * R, 0xCD);
      c.all_gather(src.data(), dst.data(), n, t);
      for (int s = 0; s < R; ++s)
        expect(same_block(dst, s, payload(t, s, 0, n)),
               "all_gather " + what + " block " + std::to_string(s));
    }
    for (int root = 0; root < R; ++root) {
      auto buf = payload(t, me, 1, n);
      c.broadcast(buf.data(), n, t, root);
      expect(buf == payload(t, root, 1, n), "broadcast " + what + " root " + std::to_string(root));
    }
    {
      // Block s of rank q's input is payload(q, 10 + s): rank me must receive payload(q, 10 + me).
      std::vector<uint8_t> src;
      for (int s = 0; s < R; ++s) {
        auto b = payload(t, me, 10 + s, n);
        src.insert(src.end(), b.begin(), b.end());
      }
      std::vector<uint8_t> dst(src.size(), 0xCD);
      c.all_to_all(src.data(), dst.data(), n, t);
      for (int q = 0; q < R; ++q)
        expect(same_block(dst, q, payload(t, q, 10 + me, n)),
               "all_to_all " + what + " from " + std::to_string(q));
    }
  }
  return g_dtype_failures;
}

// Sums of the data-movement dtypes fail on the calling rank before any communication:
// first on every rank at once (each learns it itself, none waits), then through the C API,
// then on rank 1 alone, whose peers fail with RUNTIME_ERROR naming it instead of waiting.
int case_dtype_reject(commfuse::Comm& c) {
  g_dtype_failures = 0;
  const int R = c.world_size(), me = c.rank();
  const size_t n = 16;
  std::vector<uint8_t> src(4 * R * n), dst(4 * R * n);
  for (DType t : kMoveOnly) {
    expect_sum_rejected([&] { c.all_reduce(src.data(), dst.data(), n, t); }, "all_reduce", me, t);
    expect_sum_rejected([&] { c.all_reduce(src.data(), src.data(), n, t); }, "all_reduce", me, t);
    expect_sum_rejected([&] { c.reduce_scatter(src.data(), dst.data(), n, t); }, "reduce_scatter",
                        me, t);
  }
  c_api_cases(c);
  if (R >= 2) {
    commfuse::Comm fresh(me, R, multirank::another_init_method(c));
    const DType t = me == 1 ? DType::kBool : DType::kInt8;
    try {
      fresh.reduce_scatter(src.data(), dst.data(), n, t);
      expect(false, "reduce_scatter with bool on rank 1: no error on rank " + std::to_string(me));
    } catch (const commfuse::InvalidArgument& e) {
      expect(me == 1, "rank " + std::to_string(me) + " got PARAM_INVALID: " + e.what());
      expect(std::strstr(e.what(), "reduce_scatter(rank 1): dtype bool") != nullptr, e.what());
    } catch (const commfuse::RuntimeFailure& e) {
      expect(me != 1, std::string("rank 1 got RUNTIME_ERROR: ") + e.what());
      expect(std::strstr(e.what(), "rank 1") != nullptr, e.what());
    }
  }
  return g_dtype_failures == 0 ? 0 : 1;
}
