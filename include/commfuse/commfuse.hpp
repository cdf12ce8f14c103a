// commfuse C++ API. The same code as the C API underneath; errors are exceptions whose
// type follows the SPEC §0 status code (one error model, not two).
#pragma once

#include <commfuse/commfuse.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace commfuse {

enum class Status : int32_t {
  kSuccess = COMMFUSE_SUCCESS,
  kParamNullptr = COMMFUSE_PARAM_NULLPTR,
  kParamInvalid = COMMFUSE_PARAM_INVALID,
  kRuntimeError = COMMFUSE_RUNTIME_ERROR,
  kInner = COMMFUSE_INNER,
};

// Values equal commfuseDataType (and CANN's aclDataType).
enum class DType : int32_t {
  kFloat32 = COMMFUSE_FLOAT32,
  kFloat16 = COMMFUSE_FLOAT16,
  kInt8 = COMMFUSE_INT8,
  kInt32 = COMMFUSE_INT32,
  kUInt8 = COMMFUSE_UINT8,  // uint8, int16, uint16, bool: data movement only (see commfuse.h)
  kInt16 = COMMFUSE_INT16,
  kUInt16 = COMMFUSE_UINT16,
  kInt64 = COMMFUSE_INT64,
  kBool = COMMFUSE_BOOL,
  kBFloat16 = COMMFUSE_BFLOAT16,
  kInt4 = COMMFUSE_INT4,
  kHiFloat8 = COMMFUSE_HIFLOAT8,
  kFloat8E5M2 = COMMFUSE_FLOAT8_E5M2,
  kFloat8E4M3FN = COMMFUSE_FLOAT8_E4M3FN,
  kFloat8E8M0 = COMMFUSE_FLOAT8_E8M0,
};

// Base of every commfuse exception; code() is the SPEC §0 status.
class Error : public std::runtime_error {
 public:
  Error(Status code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Status code() const noexcept { return code_; }

 private:
  Status code_;
};
// A required pointer or tensor was null (PARAM_NULLPTR).
class NullPointerError : public Error {
 public:
  explicit NullPointerError(const std::string& m) : Error(Status::kParamNullptr, m) {}
};
// Wrong dtype, shape, attribute value or group (PARAM_INVALID).
class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& m) : Error(Status::kParamInvalid, m) {}
};
// Peer failure, timeout, transport error, out of memory (RUNTIME_ERROR).
class RuntimeFailure : public Error {
 public:
  explicit RuntimeFailure(const std::string& m) : Error(Status::kRuntimeError, m) {}
};
// An internal invariant broke: a commfuse bug (INNER).
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& m) : Error(Status::kInner, m) {}
};

// "0.1.0"
const char* version() noexcept;
const char* status_name(Status status) noexcept;

// ml_dtypes / PyTorch spelling: "float32", "bfloat16", "float8_e4m3fn", "hifloat8", ...
std::string_view dtype_name(DType dtype);
// Accepts the canonical names and aliases ("float8_e8m0fnu", "fp16", "bf16", ...).
// Throws InvalidArgument for an unknown name.
DType dtype_from_name(std::string_view name);
// Bits per element (int4: 4).
int dtype_bits(DType dtype);
// Bytes that count elements occupy (int4: packed, rounded up). Throws InvalidArgument where
// that number does not fit size_t.
size_t dtype_storage_bytes(DType dtype, size_t count);

// Convert count elements, SPEC §1. See commfuseConvert for the saturate flag. src and dst may
// overlap only for the same format (a copy, as memmove); otherwise InvalidArgument.
void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t count,
             bool saturate = false);

// int4 packing: element 2j in the low nibble of byte j. pack throws InvalidArgument for a
// value outside [-8, 7]. src and dst must not share memory (InvalidArgument), except that pack
// may run in place (dst == src). For odd count, the unused high nibble of the last byte is kept.
void pack_int4(const int8_t* src, uint8_t* dst, size_t count);
void unpack_int4(const uint8_t* src, int8_t* dst, size_t count);

namespace comm {
class CommImpl;
}

// A communicator: a group of ranks that run collectives and fused operators together.
// Its name() is the `group` / `hcom` string operators take (like HcclGetCommName).
//
// init_method:
//   "tcp://host:port"  rank 0 listens there to exchange set-up data (rank, world_size given)
//   "env://"           MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE (as torch and `commfuse launch`)
//   "mpi"              rank and size from MPI_COMM_WORLD (under mpirun)
// Ranks on one host talk through shared memory; COMMFUSE_TRANSPORT=mpi forces MPI.
//
// Collectives are collective: every rank calls them in the same order with matching
// arguments; a mismatch is reported (RUNTIME_ERROR naming it), never silently combined.
// Sums are fp32 in rank order 0..R-1 (integers: exact, saturated), bitwise identical on
// every rank; they take float32, float16, bfloat16, int8 and int32 (any other dtype, e.g.
// uint8 or bool, is InvalidArgument on the calling rank). broadcast, all_gather and
// all_to_all move every dtype bitwise. Counts are elements of dtype.
class Comm {
 public:
  // A process holds one rank of a group: the operators find the communicator by its name,
  // which the group shares, so a second rank of the same group in this process (two threads
  // as two ranks) is InvalidArgument, and its peers' calls fail (it was destroyed).
  Comm(int rank, int world_size, std::string_view init_method);
  // env:// with rank and world size from the environment (RANK/WORLD_SIZE, or MPI's
  // OMPI_COMM_WORLD_RANK/SIZE under mpirun, then init_method "mpi").
  static std::unique_ptr<Comm> from_env();
  // A call in flight on another thread (a watchdog's destroy, with or without abort() first)
  // fails with RuntimeFailure "rank r destroyed the communicator while another thread was in
  // a call on it" and is waited for. A call *starting* on another thread meanwhile is a data
  // race, as for any C++ object: the C API and the Python package hold the communicator for
  // each call. Peers waiting for this rank in a later call then fail at once on shared
  // memory ("rank r destroyed the communicator"); over MPI at COMMFUSE_TIMEOUT_S, though a
  // peer's call that pairs with data this rank had sent before may complete.
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const;
  int world_size() const;
  const std::string& name() const;
  const char* transport_name() const;  // "shm" or "mpi"

  // Whether calls can still run (NCCL's ncclCommGetAsyncError). An argument error — on
  // every rank, or on some (their peers' call then fails with RuntimeFailure naming the
  // rejecting rank and its message) — or ranks passing different arguments leave the
  // communicator usable, unless the calls were also out of step; a dead or stalled peer, a
  // timeout, a peer that destroyed it (shm), a call after the program's MPI_Finalize, or
  // ranks whose calls went out of step (different call counts, or different operators at
  // one call) make it unusable,
  // and every later call fails at once with RuntimeFailure.
  bool usable() const;
  // Why it is unusable; empty while usable.
  std::string failure() const;
  // Makes the communicator unusable on this rank and tells the peers, whose waits for this
  // rank then fail at once naming it (ncclCommAbort). Destroying it is still needed. Any
  // thread may call it, usable() and failure(): a call in flight in another thread (a
  // watchdog's use) then fails with this reason (docs/reliability.md says when the peers
  // learn of it over MPI). A call from a second thread while one is in flight is refused.
  void abort(std::string_view reason = {});

  // count is per rank block (all_gather's src, reduce_scatter's dst, each all_to_all block).
  // In place: src == dst (all_gather: src anywhere in dst, which is staged where needed); the
  // reducing calls take no other overlap of dst with src (PARAM_INVALID).
  void barrier();
  void broadcast(void* buf, size_t count, DType dtype, int root);
  void all_gather(const void* src, void* dst, size_t count, DType dtype);
  void reduce_scatter(const void* src, void* dst, size_t count, DType dtype);
  void all_reduce(const void* src, void* dst, size_t count, DType dtype);
  void all_to_all(const void* src, void* dst, size_t count, DType dtype);

  comm::CommImpl& impl() { return *impl_; }

 private:
  explicit Comm(std::unique_ptr<comm::CommImpl> impl);
  std::unique_ptr<comm::CommImpl> impl_;
};

// The live communicator with this name (operators' `group` argument). An unknown name
// throws InvalidArgument.
Comm& find_comm(std::string_view name);

// Lets the host program end a call that waits for its peers (Python's Ctrl-C). The check
// runs on the waiting thread once a wait has lasted 100 ms, then every 100 ms of it; a
// non-null answer says why (e.g. "KeyboardInterrupt", copied at once): that call fails with
// RuntimeFailure "<op>(rank r): interrupted (<why>) while waiting for ..." and the
// communicator becomes unusable, as after a timeout. Over shared memory the peers' waits for
// this rank then fail at once naming it; over MPI they learn at their deadline (mpirun
// passes Ctrl-C to every rank). A call computing, not waiting, is not interrupted. One
// check per process, any thread may set it; nullptr removes it. The Python package installs
// one that runs Python's signal handlers and ends the wait when one raises.
using InterruptCheck = const char* (*)();
void set_interrupt_check(InterruptCheck check);

// ---- Fused operators (SPEC §2) ----

// A non-owning view of a tensor: element pointer, dtype, shape and strides in elements.
// Inputs are never written through it. ndim == 0 means "absent" (an optional tensor not
// given). The ops take row-major (ND) tensors; x2 may also be a transposed view, e.g.
// TensorView(w, dtype, {n, k}).t() for an (n, k) buffer used as (k, n).
//
// A tensor is host memory unless its device says otherwise: every operator (all_gather_matmul,
// matmul_reduce_scatter, matmul_all_reduce with SPEC §6's quantized forms, quant_all_reduce,
// quant_reduce_scatter, alltoall_matmul, alltoall_quant_matmul) also takes tensors in CUDA
// device memory (every tensor of a call on the same device, the device current on the
// calling thread; ranks on one host exchange through CUDA IPC, across hosts through NCCL),
// queues its work on the call's stream and returns once it is queued (a call that grows the
// communicator's device memory waits for its queued work first). Not on devices: quantize /
// dequantize and the Comm collectives.
enum class DeviceType : int32_t { kCpu = 0, kCuda = 1 };
struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;  // the CUDA device ordinal; 0 for the CPU
  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && a.index == b.index;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};
// "cpu", "cuda:0"
std::string device_name(Device d);

struct TensorView {
  static constexpr int kMaxDims = 8;

  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  Device device;

  TensorView() = default;
  // Contiguous row-major. More than kMaxDims dims, or more than 2^63 - 1 elements (strides
  // that overflow), throws InvalidArgument.
  TensorView(const void* data, DType dtype, std::initializer_list<int64_t> shape);
  // Explicit strides (elements), one per dim.
  TensorView(const void* data, DType dtype, std::initializer_list<int64_t> shape,
             std::initializer_list<int64_t> strides);
  // The same buffer with the two dims of a 2-D view swapped (InvalidArgument otherwise).
  TensorView t() const;
  bool present() const { return ndim > 0; }
  // The product of the dims (0 when absent; INT64_MAX when the product overflows).
  int64_t numel() const;
};

namespace ops {
struct PackedWeightImpl;
}  // namespace ops

// x2 packed once, ahead of the calls that multiply by it (IPEX's prepacked weights), into
// the blocked layout this machine's native 16-bit GEMM reads: oneDNN's brgemm on
// AVX512-BF16 / AMX copies a plain x2 into that layout on every call, most of a decode
// step's time (all_gather_matmul 8 rows/rank, k = n = 4096). An explicit object, never a
// cache keyed by a pointer: pass it in the options' packed_x2 of all_gather_matmul,
// matmul_reduce_scatter, matmul_all_reduce, alltoall_matmul or alltoall_quant_matmul
// together with the x2 it was packed from. That x2 is still passed, must be the tensor
// packed (same buffer, dtype, shape and strides, else InvalidArgument naming packed_x2) and
// must not change while the packed form is used (pack again after updating it).
//
// Where this machine's GEMM of `rows` rows reads x2 as given (float32; float16 or bfloat16
// without a native kernel; the direct small-m kernel) nothing is packed, packed() is false
// (description() says why), and the ops read x2 as given. An int8 x2 (SPEC §6 A8W8;
// alltoall_quant_matmul A16W8) is prepared as this machine's int8 GEMM reads it: packed
// into oneDNN's s8 layout (VNNI / AMX); without VNNI, as int16 pairs (2 bytes an element)
// for AVX2's vpmaddwd kernel or widened to float32 (4 bytes an element) for the exact
// f32-blocked path, whichever this process chose (COMMFUSE_INT8_GEMM), whatever `rows`,
// though an A8W8 or A16W8 call of at most 32 rows runs a direct kernel on x2 in place there and
// reads none of it. An int4 x2 (alltoall_quant_matmul A16W4; dense, as the op takes it) is
// unpacked to int8 and packed into oneDNN's s8 layout where that kernel packs its weights
// (VNNI / AMX; elsewhere oneDNN's int4-range GEMM reads x2 as given: nothing is packed).
// A4W4 takes none (its GEMMs read x2 per source rank's H rows).
// description() says which form was made, COMMFUSE_VERBOSE=1 which plan reads it.
//
// Not supported (InvalidArgument): FP8 and HiFloat8 x2, CUDA tensors.
// Host memory only; immutable once made, so one object may serve concurrent calls. The
// plans made with it read its packed form when they execute: the object holding it (a move
// carries it along; move-assigning over it frees it) must outlive them. The plan cache
// keeps no reference to it.
class PackedWeight {
 public:
  // x2: (k, n) row-major, or a transposed (n, k) buffer, float32 / float16 / bfloat16 /
  // int8, or int4 (dense: no padding between rows). rows: the rows a call's GEMM usually takes at
  // once (all_gather_matmul: m·R; the reducing ops: m; the alltoall ops: BS/R), which picks
  // oneDNN's layout; 0: 256; more than one GEMM call multiplies (oneDNN's 32-bit sizes:
  // (2^31 - 1) / max(k, n)): that many. A GEMM whose plan reads another layout reads x2 as
  // given.
  explicit PackedWeight(const TensorView& x2, int64_t rows = 0);
  ~PackedWeight();
  PackedWeight(PackedWeight&&) noexcept;
  PackedWeight& operator=(PackedWeight&&) noexcept;

  bool packed() const;                        // whether a packed form was made (see above)
  size_t packed_bytes() const;                // its size, padding included (0 when not packed)
  std::string description() const;            // what was packed, in which layout, or why not
  const ops::PackedWeightImpl& impl() const;  // InvalidArgument on a moved-from object

 private:
  std::unique_ptr<ops::PackedWeightImpl> impl_;
};

struct AllGatherMatmulOptions {
  // (n,): dtype of x1 or float32; quantized x1 (SPEC §6): float32, bfloat16, float16, or
  // int32 for A8W8 (added to the int32 sum before the scales)
  std::optional<TensorView> bias;
  // SPEC §6, quantized x1 (int8: A8W8; float8_e4m3fn / float8_e5m2: FP8; hifloat8: HiF8):
  // float32 scales, y = f32(x1 @ x2) * (x1_scale[i] * x2_scale[j]) + bias, rounded once to
  // output's dtype (bfloat16, float16 or float32). x2_scale is required: (1,) or (n,) (A8W8
  // also (1, n)); x1_scale optional (absent = 1): (1,), and for A8W8 also (m,) or (m, 1)
  // per token. Each rank's scales travel with its rows. Absent outside quantized mode.
  std::optional<TensorView> x1_scale;
  std::optional<TensorView> x2_scale;
  int64_t gather_index = 0;   // 0 only: gather x1
  bool gather_output = true;  // false: gather_out must be absent or shape (0,)
  int64_t comm_turn = 0;      // 0 = automatic chunking, 1..64 = chunks per rank block
  // CUDA device tensors: the cudaStream_t the op is queued on (null: the legacy default
  // stream). Outputs are ready when the stream's work so far is; calls on one communicator
  // run in call order whatever streams they are queued on. Unused for host tensors.
  void* stream = nullptr;
  // x2 packed ahead of the call (PackedWeight), from this call's x2; null: none.
  const PackedWeight* packed_x2 = nullptr;
};

// MatmulReduceScatter and MatmulAllReduce.
struct MatmulReduceOptions {
  std::string reduce_op = "sum";  // the only defined value
  // (n,), dtype of x1 or float32 (quantized x1: float32, bfloat16 or float16); added once,
  // not R times
  std::optional<TensorView> bias;
  // SPEC §6 quantized x1, as AllGatherMatmulOptions: each rank's partial
  // f32(x1 @ x2) * (x1_scale[i] * x2_scale[j]) is summed in fp32 in rank order, the bias
  // added once, one cast to output's dtype. x1_scale per token is (m,) or (m, 1) over x1's
  // m = all leading dims' rows.
  std::optional<TensorView> x1_scale;
  std::optional<TensorView> x2_scale;
  int64_t comm_turn = 0;                    // as AllGatherMatmulOptions::comm_turn
  void* stream = nullptr;                   // as AllGatherMatmulOptions::stream
  const PackedWeight* packed_x2 = nullptr;  // as AllGatherMatmulOptions::packed_x2
};

namespace ops {
class PlanImpl;
struct PlanAccess;  // the library's own access to a plan's internals
}  // namespace ops

// Plan then execute (SPEC §0 "Two phases"). An operator's plan class (AllGatherMatmulPlan
// and the others below) validates every argument on this rank before any communication (an
// invalid one throws, and aborts the group so that peers already waiting fail at once
// naming this rank); execute runs the op on the tensors given to the constructor, which
// must stay alive, and may be called again. execute needs workspace_size() bytes of
// workspace, 4-byte aligned (null when the size is 0). Collective: every rank of `group`
// constructs and executes its plan in the same order.
//
// Every operator's plan is a Plan: the op's class adds only its constructor, so plans of
// different ops can be kept alike (std::vector<Plan>). A moved-from plan is empty: its
// methods throw InvalidArgument on the calling rank only (the peers are not told, so they
// wait for that rank until COMMFUSE_TIMEOUT_S). Constructing a plan whose descriptor
// (shapes, strides, dtypes, options, group; not the data pointers) was planned before takes
// the earlier plan from a cache and binds this call's tensors: the argument checks run, the
// planning (algorithm choice, GEMM primitives, layouts) does not.
class Plan {
 public:
  explicit Plan(std::unique_ptr<ops::PlanImpl> impl);  // what the op classes construct
  virtual ~Plan();
  Plan(Plan&&) noexcept;
  Plan& operator=(Plan&&) noexcept;

  size_t workspace_size() const;
  const char* schedule_name() const;  // which algorithm was chosen ("fused", "unfused", ...)
  // One line saying what the plan will run and on which kernels (the CPU's ISA decides,
  // e.g. whether fp16/bf16 operands are widened to fp32): what COMMFUSE_VERBOSE=1 prints.
  std::string description() const;
  void execute(void* workspace, size_t workspace_bytes);
  // A plan over CUDA device tensors queued on `stream` (a cudaStream_t) instead of the
  // options' stream (the C API's Xxx(..., stream) form; null: the options' stream, which is
  // null, the legacy default stream, unless set); host plans ignore it.
  void execute(void* workspace, size_t workspace_bytes, void* stream);

 protected:
  const ops::PlanImpl& impl() const;

 private:
  friend struct ops::PlanAccess;
  std::unique_ptr<ops::PlanImpl> impl_;
};

class AllGatherMatmulPlan : public Plan {
 public:
  // output (m·R, n) = gather_out @ x2 + bias; gather_out (m·R, k) = rank-order concat of x1.
  AllGatherMatmulPlan(const TensorView& x1, const TensorView& x2, std::string_view group,
                      int world_size, const TensorView& output, const TensorView& gather_out,
                      const AllGatherMatmulOptions& options = {});
};

class MatmulReduceScatterPlan : public Plan {
 public:
  // output (m/R, n) on rank r = rows [r·m/R, (r+1)·m/R) of Σ_s x1_s @ x2_s, plus bias
  // (added once: every rank must pass the same bias, or none; a call where host biases
  // differ fails on every rank naming it — compared by a digest of the values, 1.4 us
  // per 8 KiB on an AMX Xeon; CUDA biases are compared as present or not only).
  MatmulReduceScatterPlan(const TensorView& x1, const TensorView& x2, std::string_view group,
                          int world_size, const TensorView& output,
                          const MatmulReduceOptions& options = {});
};

class MatmulAllReducePlan : public Plan {
 public:
  // x1 (m, k) or (b, s, k); output = x1's leading dims × n = Σ_s x1_s @ x2_s + bias,
  // bitwise identical on every rank. Every rank must pass the same bias (or none), checked
  // as for matmul_reduce_scatter.
  MatmulAllReducePlan(const TensorView& x1, const TensorView& x2, std::string_view group,
                      const TensorView& output, const MatmulReduceOptions& options = {});
};

// One-shot forms: plan, allocate the workspace, execute (torch_npu's npu_all_gather_base_mm,
// npu_mm_reduce_scatter_base, npu_mm_all_reduce_base).
void all_gather_matmul(const TensorView& x1, const TensorView& x2, std::string_view group,
                       int world_size, const TensorView& output, const TensorView& gather_out,
                       const AllGatherMatmulOptions& options = {});
void matmul_reduce_scatter(const TensorView& x1, const TensorView& x2, std::string_view group,
                           int world_size, const TensorView& output,
                           const MatmulReduceOptions& options = {});
void matmul_all_reduce(const TensorView& x1, const TensorView& x2, std::string_view group,
                       const TensorView& output, const MatmulReduceOptions& options = {});

// ---- AlltoAllQuantMatmul and AlltoAllMatmul (SPEC §3) ----
//
// x1 (BS, H) on every rank, BS % R == 0. Rank r's permuted activations are
//   permuted[i, s*H:(s+1)*H] = x1 of rank s, row r*BS/R + i      (shape (BS/R, R*H))
// and output (BS/R, N) = permuted @ x2 (+ bias), quantized as below for the quant op.

// x1QuantMode / x2QuantMode values (CANN's enum).
enum class QuantMode : int64_t {
  kNone = 0,
  kPerTensor = 1,
  kPerChannel = 2,
  kPerToken = 3,
  kPerGroup = 4,
  kPerBlock = 5,
  kMx = 6,
  kPerTokenDynamic = 7,
};

// Everything of aclnnAlltoAllQuantMatmul besides x1, x2, x2Scale, group and the outputs.
// Supported combinations (SPEC §3; anything else is PARAM_INVALID):
//   A16W8  x1 float16/bfloat16, x2 int8, x1_quant_mode 7 (dynamic per token), x2 mode 2
//   A16W4  x1 float16/bfloat16, x2 int4, x1_quant_mode 7, x2 mode 2
//   A4W4   x1 int4, x2 int4, x1_quant_mode 3 (static per token: x1_scale fp32 (BS,)), mode 2
struct AlltoAllQuantMatmulOptions {
  std::optional<TensorView> bias;      // (N,): x1's dtype or float32 (A4W4: fp16/bf16/fp32)
  std::optional<TensorView> x1_scale;  // A16: optional smooth scale (R*H,), x1's dtype;
                                       // A4W4: required per-token scale (BS,), float32
  int64_t x1_quant_mode = 7;
  int64_t x2_quant_mode = 2;
  bool transpose_x2 = false;  // x2 is stored (N, R*H) instead of (R*H, N)
  // Reserved (SPEC §3): must stay absent / at these values.
  std::optional<TensorView> comm_scale, x1_offset, x2_offset;
  std::optional<std::vector<int64_t>> all_to_all_axes;  // absent or {-2, -1}
  int64_t comm_quant_mode = 0;
  int64_t comm_quant_dtype = -1;
  int64_t x1_quant_dtype = 2;  // ignored (CANN's example passes 2)
  int64_t group_size = 0;
  bool transpose_x1 = false;
  // CUDA device tensors (every combination; x2 other than int8 transposed is converted to
  // that form in device scratch each call): the cudaStream_t, as AllGatherMatmulOptions::stream.
  void* stream = nullptr;
  // A16W8 / A16W4: the int8 / int4 x2 prepared ahead of the calls (PackedWeight), made from
  // x2 as a (R*H, N) view: x2 itself, or with transpose_x2 its (N, R*H) buffer's transposed
  // view, for rows = BS/R (the rows each rank multiplies; the GEMM runs in blocks of up to 64
  // of them at N = 4096, whose plan must read the layout prepared, else x2 is prepared per
  // call as without it). Host only; A4W4: not supported (its GEMMs read x2 per source rank's
  // H rows). Null: none.
  const PackedWeight* packed_x2 = nullptr;
};

struct AlltoAllMatmulOptions {
  std::optional<TensorView> bias;                       // (N,), x1's dtype or float32
  bool transpose_x2 = false;                            // x2 is stored (N, R*H)
  std::optional<std::vector<int64_t>> all_to_all_axes;  // absent or {-2, -1}
  bool transpose_x1 = false;                            // reserved: must be false
  void* stream = nullptr;  // CUDA device tensors, as AllGatherMatmulOptions::stream
  // x2 packed ahead of the calls (PackedWeight, 16-bit x2 where this machine's kernel reads
  // it packed), made as AlltoAllQuantMatmulOptions::packed_x2 says; null: none.
  const PackedWeight* packed_x2 = nullptr;
};

// Plan then execute, as AllGatherMatmulPlan. x2_scale: float32 (N,). output (BS/R, N):
// x1's dtype (A4W4: float16 or bfloat16). all_to_all_out: absent, or (BS/R, R*H) in x1's
// dtype, receiving `permuted` before quantization.
class AlltoAllQuantMatmulPlan : public Plan {
 public:
  AlltoAllQuantMatmulPlan(const TensorView& x1, const TensorView& x2, const TensorView& x2_scale,
                          std::string_view group, const TensorView& output,
                          const TensorView& all_to_all_out = {},
                          const AlltoAllQuantMatmulOptions& options = {});
  const char* combination_name() const;  // "A16W8", "A16W4", "A4W4"
};

// output (BS/R, N) = permuted @ x2 + bias; x1, x2, output float16, bfloat16 or float32.
class AlltoAllMatmulPlan : public Plan {
 public:
  AlltoAllMatmulPlan(const TensorView& x1, const TensorView& x2, std::string_view group,
                     const TensorView& output, const TensorView& all_to_all_out = {},
                     const AlltoAllMatmulOptions& options = {});
};

void alltoall_quant_matmul(const TensorView& x1, const TensorView& x2, const TensorView& x2_scale,
                           std::string_view group, const TensorView& output,
                           const TensorView& all_to_all_out = {},
                           const AlltoAllQuantMatmulOptions& options = {});
void alltoall_matmul(const TensorView& x1, const TensorView& x2, std::string_view group,
                     const TensorView& output, const TensorView& all_to_all_out = {},
                     const AlltoAllMatmulOptions& options = {});

// ---- Quantized reductions (SPEC §4) and quantize helpers (SPEC §5) ----

// x: (bs, H) or (b, s, H) codes in int8, hifloat8, float8_e4m3fn or float8_e5m2. scales:
// float32 (bs, H/128) / (b, s, H/128), one per 128 elements (K-G), or float8_e8m0
// (bs, H/64, 2) / (b, s, H/64, 2), one per 32 elements (MX; x float8 only). The sum over
// ranks of x·scale is taken in fp32 in rank order and rounded once to output's dtype
// (float32, float16, bfloat16): bitwise identical on every rank. reduce_op must be "sum".
// Plans behave like the matmul ops' plans above.
class QuantAllReducePlan : public Plan {
 public:
  // output: x's shape.
  QuantAllReducePlan(const TensorView& x, const TensorView& scales, std::string_view group,
                     std::string_view reduce_op, const TensorView& output);
};

class QuantReduceScatterPlan : public Plan {
 public:
  // output (BS/R, H) on rank r = rows [r·BS/R, (r+1)·BS/R) of the sum; BS = bs or b·s.
  QuantReduceScatterPlan(const TensorView& x, const TensorView& scales, std::string_view group,
                         std::string_view reduce_op, const TensorView& output);
};

// CUDA device tensors (every tensor on one device, as the matmul ops): queued on `stream`
// (a cudaStream_t; null: the legacy default stream); plans take it in Plan::execute.
void quant_all_reduce(const TensorView& x, const TensorView& scales, std::string_view group,
                      const TensorView& output, std::string_view reduce_op = "sum",
                      void* stream = nullptr);
void quant_reduce_scatter(const TensorView& x, const TensorView& scales, std::string_view group,
                          const TensorView& output, std::string_view reduce_op = "sum",
                          void* stream = nullptr);

// quantize x (float32, float16 or bfloat16, last dim H) into q (x's shape; its dtype picks
// the format) and scales, in the layouts above. mode "per_token_group" (q int8, hifloat8,
// float8_e4m3fn, float8_e5m2; float32 scales, group 128) or "mx" (q float8_e4m3fn or
// float8_e5m2; float8_e8m0 scales (…, H/64, 2), group 32) or "per_token" (q int8 or int4,
// packed in pairs along H; float32 scales, one per row: x's leading dims; SPEC §3's
// quantizer). group_size 0 means the mode's. Not collective.
void quantize(const TensorView& x, std::string_view mode, const TensorView& q,
              const TensorView& scales, int64_t group_size = 0);
// output (q's shape, float32 / float16 / bfloat16) = q · scale, the map the ops apply.
void dequantize(const TensorView& q, const TensorView& scales, std::string_view mode,
                const TensorView& output, int64_t group_size = 0);

}  // namespace commfuse
