/* commfuse C API — aclnn-shaped entry points for fused communication + computation.
 *
 * Every function returns a commfuseStatus_t. On failure the calling thread's last error
 * message (commfuseGetLastErrorMessage) says which function, argument and value failed.
 * Nothing in this API throws or aborts on bad input. */
#ifndef COMMFUSE_COMMFUSE_H_
#define COMMFUSE_COMMFUSE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COMMFUSE_VERSION_MAJOR 0
#define COMMFUSE_VERSION_MINOR 1
#define COMMFUSE_VERSION_PATCH 0

/* Status codes: numeric values shared with CANN's aclnn (SPEC.md §0). */
typedef enum {
  COMMFUSE_SUCCESS = 0,
  COMMFUSE_PARAM_NULLPTR = 161001,
  COMMFUSE_PARAM_INVALID = 161002,
  COMMFUSE_RUNTIME_ERROR = 361001,
  COMMFUSE_INNER = 561000,
  /* MIN and MAX make every int a valid value in C++ too, where a value outside an enum's
   * range is undefined behaviour (with MAX alone, negative ints were outside it). */
  COMMFUSE_STATUS_MIN_ENUM_ = -0x7FFFFFFF - 1,
  COMMFUSE_STATUS_MAX_ENUM_ = 0x7FFFFFFF,
} commfuseStatus_t;

/* Element types. Values follow CANN's aclDataType so ported code keeps its constants.
 * UINT8, INT16, UINT16 and BOOL are data-movement types: the collectives that only move
 * bytes (broadcast, all_gather, all_to_all) take them; sums, commfuseConvert and the
 * operators reject them (PARAM_INVALID). */
typedef enum {
  COMMFUSE_FLOAT32 = 0,
  COMMFUSE_FLOAT16 = 1,
  COMMFUSE_INT8 = 2,
  COMMFUSE_INT32 = 3,
  COMMFUSE_UINT8 = 4,
  COMMFUSE_INT16 = 6,
  COMMFUSE_UINT16 = 7,
  COMMFUSE_INT64 = 9,
  COMMFUSE_BOOL = 12,
  COMMFUSE_BFLOAT16 = 27,
  COMMFUSE_INT4 = 29,
  COMMFUSE_HIFLOAT8 = 34,
  COMMFUSE_FLOAT8_E5M2 = 35,
  COMMFUSE_FLOAT8_E4M3FN = 36,
  COMMFUSE_FLOAT8_E8M0 = 37,
  /* Callers may pass any int (both bounds keep it in range in C++); we validate it. */
  COMMFUSE_DATATYPE_MIN_ENUM_ = -0x7FFFFFFF - 1,
  COMMFUSE_DATATYPE_MAX_ENUM_ = 0x7FFFFFFF,
} commfuseDataType;

/* Message of the last failed call on this thread ("" if none). Valid until the next call. */
const char* commfuseGetLastErrorMessage(void);
/* Fixed name of a status code, e.g. "PARAM_INVALID". */
const char* commfuseGetStatusName(commfuseStatus_t status);

/* "0.1.0" */
const char* commfuseGetVersion(void);

/* Name of a data type as ml_dtypes / PyTorch spell it ("bfloat16", "float8_e4m3fn", ...). */
const char* commfuseDataTypeName(commfuseDataType dtype);
/* Parse a name (aliases accepted, e.g. "float8_e8m0fnu"). */
commfuseStatus_t commfuseDataTypeFromName(const char* name, commfuseDataType* dtype);
/* Storage size of one element in bits (int4: 4). */
commfuseStatus_t commfuseDataTypeBits(commfuseDataType dtype, int* bits);

/* Convert count elements from src (srcType) to dst (dstType) with the rules of SPEC.md §1.
 * saturate != 0 clamps out-of-range values to the largest finite value for the fp8 and
 * HiFloat8 formats (and E8M0); integer targets always saturate. int4 buffers are packed,
 * two elements per byte, element 2j in the low nibble of byte j. src and dst may overlap
 * only when the formats are the same (a copy, as memmove); otherwise PARAM_INVALID. */
commfuseStatus_t commfuseConvert(const void* src, commfuseDataType srcType, void* dst,
                                 commfuseDataType dstType, uint64_t count, int saturate);

/* Pack count int8 values in [-8, 7] into int4 (count/2 rounded up bytes), and back.
 * Packing a value outside [-8, 7] is PARAM_INVALID, and so are src and dst sharing memory,
 * except a pack in place (dst == src). */
commfuseStatus_t commfusePackInt4(const int8_t* src, uint8_t* dst, uint64_t count);
commfuseStatus_t commfuseUnpackInt4(const uint8_t* src, int8_t* dst, uint64_t count);

/* ---- Communicators (see commfuse.hpp for the semantics) ---- */

typedef struct commfuseComm* commfuseComm_t;

#define COMMFUSE_COMM_NAME_MAX 128 /* bytes, including the terminating NUL */

/* init_method: "tcp://host:port", "env://" or "mpi". */
commfuseStatus_t commfuseCommInitRank(int rank, int worldSize, const char* initMethod,
                                      commfuseComm_t* comm);
/* RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT from the environment (or MPI under mpirun). */
commfuseStatus_t commfuseCommInitFromEnv(commfuseComm_t* comm);
commfuseStatus_t commfuseCommDestroy(commfuseComm_t comm);
/* Writes the communicator's name (the `group`/`hcom` string of the operators) into name,
 * which must hold COMMFUSE_COMM_NAME_MAX bytes. */
commfuseStatus_t commfuseCommGetName(commfuseComm_t comm, char* name);
commfuseStatus_t commfuseCommRank(commfuseComm_t comm, int* rank);
commfuseStatus_t commfuseCommSize(commfuseComm_t comm, int* worldSize);

/* Whether calls can still run on comm (NCCL's ncclCommGetAsyncError): *usable is 1, or 0
 * after a transport failure (a dead or stalled peer, a timeout, calls out of step, i.e.
 * different call counts or different operators at one call, a peer that destroyed the
 * communicator (shm), a call after the program's MPI_Finalize, or commfuseCommAbort); the
 * reason is then in commfuseGetLastErrorMessage(). A rejected call (bad arguments on any
 * rank) or ranks passing different shapes leave it usable, unless the calls were also out
 * of step (docs/reliability.md). */
commfuseStatus_t commfuseCommIsUsable(commfuseComm_t comm, int* usable);
/* Makes comm unusable on this rank and tells its peers, whose waits for this rank then fail
 * at once naming it (ncclCommAbort). commfuseCommDestroy is still needed. May be called from
 * another thread while a call on comm is in flight (a watchdog): that call then fails with
 * COMMFUSE_RUNTIME_ERROR (docs/reliability.md, Threads). */
commfuseStatus_t commfuseCommAbort(commfuseComm_t comm);

/* Collectives. count is in elements of dtype (see commfuse.hpp for per-op meaning).
 * Broadcast, AllGather and AllToAll move any dtype bitwise; ReduceScatter and AllReduce sum
 * FLOAT32, FLOAT16, BFLOAT16, INT8 and INT32 only (others: PARAM_INVALID on this rank). */
commfuseStatus_t commfuseBarrier(commfuseComm_t comm);
commfuseStatus_t commfuseBroadcast(void* buf, uint64_t count, commfuseDataType dtype, int root,
                                   commfuseComm_t comm);
commfuseStatus_t commfuseAllGather(const void* sendbuf, void* recvbuf, uint64_t sendCount,
                                   commfuseDataType dtype, commfuseComm_t comm);
commfuseStatus_t commfuseReduceScatter(const void* sendbuf, void* recvbuf, uint64_t recvCount,
                                       commfuseDataType dtype, commfuseComm_t comm);
commfuseStatus_t commfuseAllReduce(const void* sendbuf, void* recvbuf, uint64_t count,
                                   commfuseDataType dtype, commfuseComm_t comm);
commfuseStatus_t commfuseAllToAll(const void* sendbuf, void* recvbuf, uint64_t countPerPeer,
                                  commfuseDataType dtype, commfuseComm_t comm);

/* ---- Fused operators (SPEC.md §2), aclnn-shaped ----
 *
 * Tensors are descriptors of caller-owned memory. Each operator has two calls:
 *   XxxGetWorkspaceSize(inputs..., outputs..., &workspaceSize, &executor)
 *     validates every argument on this rank before any communication (an invalid one
 *     returns its status here, and is told to the group, so that peers already waiting
 *     fail the call at once naming this rank; the communicator stays usable) and creates an
 *     executor;
 *   Xxx(workspace, workspaceSize, executor, stream)
 *     runs it. The executor is consumed by this call, successful or not (as aclnn's is);
 *     an executor that will not be run is freed with commfuseDestroyOpExecutor. Running or
 *     destroying a consumed executor again is PARAM_INVALID; running a consumed one (of the
 *     last 4096 consumed) or one made for another operator is PARAM_INVALID told to the
 *     group (the peers fail their call naming this rank instead of waiting for it).
 * Every handle (communicator, tensor descriptor, int array, packed weight, executor) is an
 * opaque number, never reused, not a pointer to dereference: one already destroyed (or
 * consumed), or never returned by commfuse, is PARAM_INVALID naming the argument, and
 * destroying NULL does nothing. Any thread may use any handle, but a tensor descriptor being
 * changed (commfuseSetTensorDevice, commfuseSetTensorPackedWeight) must not be read by
 * another thread's call meanwhile.
 * The tensors' memory must stay valid until the second call returns; the descriptors
 * themselves may be destroyed right after the first call. workspace must be 4-byte aligned
 * and hold workspaceSize bytes (null when 0). stream is for GPU builds; pass NULL on CPU.
 * Both calls are collective over the group, in the same order on every rank.
 *
 * Common arguments: group is a communicator name (commfuseCommGetName); bias is optional
 * (NULL); commTurn is 0 (automatic chunking) or 1..64 (chunks per rank block);
 * streamMode must be 1, the only value CANN defines. */

typedef struct commfuseTensor commfuseTensor_t;
typedef struct commfuseOpExecutor commfuseOpExecutor_t;

/* A descriptor of ndim (<= 8) dims over data. strides are in elements, NULL = row-major
 * contiguous. Returns NULL on a bad argument (see commfuseGetLastErrorMessage): ndim outside
 * 1..8, a null shape, an unknown dtype, a negative dim, or dims whose non-zero ones multiply
 * to more than 2^63 - 1 bytes (no such memory exists, and its strides overflow). */
commfuseTensor_t* commfuseCreateTensor(const int64_t* shape, uint64_t ndim, const int64_t* strides,
                                       commfuseDataType dtype, void* data);
commfuseStatus_t commfuseDestroyTensor(const commfuseTensor_t* tensor);

/* Where a tensor's memory is (commfuse.hpp's Device): host memory unless marked. */
typedef enum {
  COMMFUSE_DEVICE_CPU = 0,
  COMMFUSE_DEVICE_CUDA = 1,
  COMMFUSE_DEVICE_MIN_ENUM_ = -0x7FFFFFFF - 1,
  COMMFUSE_DEVICE_MAX_ENUM_ = 0x7FFFFFFF,
} commfuseDeviceType;
/* Marks the tensor's memory as CUDA device memory of device ordinal `index`
 * (COMMFUSE_DEVICE_CUDA), or as host memory (COMMFUSE_DEVICE_CPU, index 0: the default).
 * Every operator (AllGatherMatmul, MatmulReduceScatter, MatmulAllReduce, their V2 quantized
 * forms, QuantAllReduce, QuantReduceScatter, AlltoAllMatmul, AlltoAllQuantMatmul) takes CUDA
 * tensors: every tensor of a call on the calling thread's current device (ranks on one host
 * exchange through CUDA IPC, across hosts through NCCL); the Xxx call's stream is the
 * cudaStream_t the op is queued on (NULL: the legacy default stream) and it returns once the
 * work is queued. A build without CUDA rejects device tensors (PARAM_INVALID "not
 * supported"). A type other than these two, a negative index, or one past this host's
 * devices, is PARAM_INVALID (the devices are counted where one can be used; without a usable
 * device the operators report RUNTIME_ERROR "no usable CUDA device" at planning). */
commfuseStatus_t commfuseSetTensorDevice(commfuseTensor_t* tensor, commfuseDeviceType type,
                                         int index);
/* x2 packed once, ahead of the calls that multiply by it (commfuse.hpp's PackedWeight): the
 * blocked layout this machine's native 16-bit GEMM reads, which it otherwise copies x2 into
 * on every call; an int8 x2 (A8W8, AlltoAllQuantMatmul A16W8) as the int8 GEMM reads it
 * (oneDNN's s8 layout; without VNNI int16 pairs for AVX2's vpmaddwd kernel or float32 for
 * the exact f32-blocked path, where an A8W8 or A16W8 call of at most 32 rows reads x2 in place
 * instead); an int4 x2 (AlltoAllQuantMatmul A16W4, dense) unpacked into oneDNN's s8 layout
 * where VNNI / AMX multiply it (A4W4 takes none). x2: (k, n) row-major or a
 * transposed (n, k) view, float32 / float16 / bfloat16 / int8 / int4, host memory
 * (AlltoAllQuantMatmul with transposeX2: a (R*H, N) descriptor of the (N, R*H) buffer, transposed
 * strides); rows: the rows a call's GEMM usually takes (AlltoAllQuantMatmul: BS/R; 0: 256). Returns
 * NULL on a bad argument (see commfuseGetLastErrorMessage). Where this machine's GEMM of `rows`
 * rows reads x2 as given (fp32; no native 16-bit kernel; the direct small-m kernel) nothing is
 * packed (commfusePackedWeightIsPacked says 0) and the ops read x2 as given. */
typedef struct commfusePackedWeight commfusePackedWeight_t;
commfusePackedWeight_t* commfuseCreatePackedWeight(const commfuseTensor_t* x2, int64_t rows);
/* 1 when a packed form was made, 0 when not, -1 for NULL or a destroyed handle. */
int commfusePackedWeightIsPacked(const commfusePackedWeight_t* packed);
commfuseStatus_t commfuseDestroyPackedWeight(const commfusePackedWeight_t* packed);
/* Attaches packed (NULL: detaches) to the x2 descriptor: AllGatherMatmul, MatmulReduceScatter
 * and MatmulAllReduce (and their V2 forms), AlltoAllMatmul and AlltoAllQuantMatmul (A16W8, A16W4),
 * given this descriptor as x2 read the packed form (the C++ options' packed_x2). The descriptor
 * must describe the tensor packed (same data, dtype, shape, strides: else GetWorkspaceSize returns
 * PARAM_INVALID naming packed_x2), whose memory must not change while the packed form is used. The
 * descriptors it is attached to, and the executors planned with them, keep the packed form alive:
 * its handle may be destroyed at any time. Not supported with
 * fp8 / HiFloat8 x2, AlltoAllQuantMatmul A4W4 or CUDA tensors: PARAM_INVALID at GetWorkspaceSize.
 */
commfuseStatus_t commfuseSetTensorPackedWeight(commfuseTensor_t* x2,
                                               const commfusePackedWeight_t* packed);
/* Frees an executor that GetWorkspaceSize returned and that will not be executed. */
commfuseStatus_t commfuseDestroyOpExecutor(commfuseOpExecutor_t* executor);

/* output (m*R, n) = gatherOut @ x2 + bias; gatherOut (m*R, k) = the ranks' x1 in rank order.
 * x1 (m, k); x2 (k, n), may be a transposed view; gatherIndex must be 0. gatherOut NULL or
 * shape (0,) means gather_output = false (the gathered rows are not returned). */
commfuseStatus_t commfuseAllGatherMatmulGetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* bias,
    const char* group, int64_t gatherIndex, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, const commfuseTensor_t* gatherOut, uint64_t* workspaceSize,
    commfuseOpExecutor_t** executor);
commfuseStatus_t commfuseAllGatherMatmul(void* workspace, uint64_t workspaceSize,
                                         commfuseOpExecutor_t* executor, void* stream);

/* output (m/R, n) on rank r = rows [r*m/R, (r+1)*m/R) of sum over ranks of x1 @ x2, plus
 * bias once. reduceOp must be "sum". */
commfuseStatus_t commfuseMatmulReduceScatterGetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* bias,
    const char* group, const char* reduceOp, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, uint64_t* workspaceSize, commfuseOpExecutor_t** executor);
commfuseStatus_t commfuseMatmulReduceScatter(void* workspace, uint64_t workspaceSize,
                                             commfuseOpExecutor_t* executor, void* stream);

/* output (x1's leading dims, n) = sum over ranks of x1 @ x2, plus bias once; bitwise
 * identical on every rank. x1 (m, k) or (b, s, k). reduceOp must be "sum". */
commfuseStatus_t commfuseMatmulAllReduceGetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* bias,
    const char* group, const char* reduceOp, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, uint64_t* workspaceSize, commfuseOpExecutor_t** executor);
commfuseStatus_t commfuseMatmulAllReduce(void* workspace, uint64_t workspaceSize,
                                         commfuseOpExecutor_t* executor, void* stream);

/* ---- The same three ops with quantized inputs (SPEC.md §6: CANN's V2 forms) ----
 *
 * The V1 arguments plus x1ScaleOptional / x2ScaleOptional after the bias; the output dtype is
 * the output tensor's. Quantized mode is selected by x1's dtype: int8 (A8W8, exact int32
 * sum), float8_e4m3fn / float8_e5m2 (FP8; x2 either float8 format) or hifloat8 (HiF8).
 * output = f32(x1 @ x2) * (x1Scale[i] * x2Scale[j]) + bias, rounded once to the output's
 * dtype (bfloat16, float16 or float32). x2ScaleOptional is required then: fp32 (1,) or (n,)
 * (A8W8 also (1, n)); x1ScaleOptional fp32 (1,), A8W8 also (m,) / (m, 1) per token (NULL =
 * 1). Bias: fp32, bf16 or fp16 (n,); int32 (n,) for A8W8 all-gather-matmul (added to the
 * int32 sum). gatherOut holds x1's codes. The reducing ops sum the dequantized fp32
 * partials in rank order, then add the bias once. With float x1 the V2 forms are the V1
 * ones (the scales must then be NULL). Executed by the V2 (or V1) execute call. */
commfuseStatus_t commfuseAllGatherMatmulV2GetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* biasOptional,
    const commfuseTensor_t* x1ScaleOptional, const commfuseTensor_t* x2ScaleOptional,
    const char* group, int64_t gatherIndex, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, const commfuseTensor_t* gatherOut, uint64_t* workspaceSize,
    commfuseOpExecutor_t** executor);
commfuseStatus_t commfuseAllGatherMatmulV2(void* workspace, uint64_t workspaceSize,
                                           commfuseOpExecutor_t* executor, void* stream);
commfuseStatus_t commfuseMatmulReduceScatterV2GetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* biasOptional,
    const commfuseTensor_t* x1ScaleOptional, const commfuseTensor_t* x2ScaleOptional,
    const char* group, const char* reduceOp, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, uint64_t* workspaceSize, commfuseOpExecutor_t** executor);
commfuseStatus_t commfuseMatmulReduceScatterV2(void* workspace, uint64_t workspaceSize,
                                               commfuseOpExecutor_t* executor, void* stream);
commfuseStatus_t commfuseMatmulAllReduceV2GetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* biasOptional,
    const commfuseTensor_t* x1ScaleOptional, const commfuseTensor_t* x2ScaleOptional,
    const char* group, const char* reduceOp, int64_t commTurn, int64_t streamMode,
    const commfuseTensor_t* output, uint64_t* workspaceSize, commfuseOpExecutor_t** executor);
commfuseStatus_t commfuseMatmulAllReduceV2(void* workspace, uint64_t workspaceSize,
                                           commfuseOpExecutor_t* executor, void* stream);

/* ---- AlltoAllQuantMatmul / AlltoAllMatmul (SPEC.md §3), aclnn-shaped ----
 *
 * x1 (BS, H) on every rank, BS % R == 0; rank r's permuted activations (BS/R, R*H) hold, in
 * columns [s*H, (s+1)*H), rows r*BS/R.. of rank s's x1. output (BS/R, N).
 * alltoAllOutOptional: NULL, or (BS/R, R*H) in x1's dtype receiving the permuted rows.
 * alltoAllAxesOptional: NULL or [-2, -1]. */

/* An array of int64 (like aclIntArray). */
typedef struct commfuseIntArray commfuseIntArray_t;
commfuseIntArray_t* commfuseCreateIntArray(const int64_t* value, uint64_t size);
commfuseStatus_t commfuseDestroyIntArray(const commfuseIntArray_t* array);

/* Combinations: A16W8 (x1 fp16/bf16, x2 int8, x1QuantMode 7, x2QuantMode 2), A16W4 (x2 int4,
 * activations quantized to the int4 range), A4W4 (x1 and x2 int4, x1QuantMode 3 with
 * x1ScaleOptional fp32 (BS,)). x2 (R*H, N), or (N, R*H) with transposeX2. x2Scale fp32 (N,).
 * x1ScaleOptional for A16: optional smooth scale (R*H,) in x1's dtype. Reserved (must be
 * NULL / these values): commScaleOptional, x1OffsetOptional, x2OffsetOptional,
 * commQuantMode 0, commQuantDtype -1, groupSize 0, transposeX1 false. x1QuantDtype is
 * ignored. */
commfuseStatus_t commfuseAlltoAllQuantMatmulGetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* biasOptional,
    const commfuseTensor_t* x1ScaleOptional, const commfuseTensor_t* x2Scale,
    const commfuseTensor_t* commScaleOptional, const commfuseTensor_t* x1OffsetOptional,
    const commfuseTensor_t* x2OffsetOptional, const char* group,
    const commfuseIntArray_t* alltoAllAxesOptional, int64_t x1QuantMode, int64_t x2QuantMode,
    int64_t commQuantMode, int64_t commQuantDtype, int64_t x1QuantDtype, int64_t groupSize,
    int transposeX1, int transposeX2, const commfuseTensor_t* output,
    const commfuseTensor_t* alltoAllOutOptional, uint64_t* workspaceSize,
    commfuseOpExecutor_t** executor);
commfuseStatus_t commfuseAlltoAllQuantMatmul(void* workspace, uint64_t workspaceSize,
                                             commfuseOpExecutor_t* executor, void* stream);

/* output = permuted @ x2 + bias; x1, x2, output fp16/bf16/fp32, bias x1's dtype or fp32. */
commfuseStatus_t commfuseAlltoAllMatmulGetWorkspaceSize(
    const commfuseTensor_t* x1, const commfuseTensor_t* x2, const commfuseTensor_t* biasOptional,
    const char* group, const commfuseIntArray_t* alltoAllAxesOptional, int transposeX1,
    int transposeX2, const commfuseTensor_t* output, const commfuseTensor_t* alltoAllOutOptional,
    uint64_t* workspaceSize, commfuseOpExecutor_t** executor);
commfuseStatus_t commfuseAlltoAllMatmul(void* workspace, uint64_t workspaceSize,
                                        commfuseOpExecutor_t* executor, void* stream);

/* ---- Quantized reductions (SPEC.md §4) and quantize helpers (§5) ----
 *
 * x: (bs, H) or (b, s, H) codes, int8 / hifloat8 / float8_e4m3fn / float8_e5m2. scales:
 * float32 (..., H/128) (per-token-group, 128 elements each) or float8_e8m0 (..., H/64, 2)
 * (MX, 32 elements each; x float8 only). output float32, float16 or bfloat16. The sum over
 * ranks of x*scale is taken in fp32 in rank order and rounded once: identical on every
 * rank. reduceOp must be "sum". Two calls as for the operators above. */
commfuseStatus_t commfuseQuantAllReduceGetWorkspaceSize(const commfuseTensor_t* x,
                                                        const commfuseTensor_t* scales,
                                                        const char* group, const char* reduceOp,
                                                        const commfuseTensor_t* output,
                                                        uint64_t* workspaceSize,
                                                        commfuseOpExecutor_t** executor);
commfuseStatus_t commfuseQuantAllReduce(void* workspace, uint64_t workspaceSize,
                                        commfuseOpExecutor_t* executor, void* stream);
/* output (BS/R, H) on rank r = rows [r*BS/R, (r+1)*BS/R) of the sum; BS % R == 0. */
commfuseStatus_t commfuseQuantReduceScatterGetWorkspaceSize(const commfuseTensor_t* x,
                                                            const commfuseTensor_t* scales,
                                                            const char* group, const char* reduceOp,
                                                            const commfuseTensor_t* output,
                                                            uint64_t* workspaceSize,
                                                            commfuseOpExecutor_t** executor);
commfuseStatus_t commfuseQuantReduceScatter(void* workspace, uint64_t workspaceSize,
                                            commfuseOpExecutor_t* executor, void* stream);

/* Quantize x (float32/float16/bfloat16, last dim H) into q (x's shape, its dtype picks the
 * format) and scales, in the layouts the ops take. mode "per_token_group" (q int8, hifloat8,
 * float8_e4m3fn, float8_e5m2; float32 scales, group 128), "mx" (q float8_e4m3fn or
 * float8_e5m2; float8_e8m0 scales (..., H/64, 2), group 32) or "per_token" (x at least 2-D;
 * q int8 or int4, packed in pairs along H; float32 scales, one per row: x's leading dims;
 * SPEC.md §3's quantizer, alltoall_quant_matmul's). groupSize 0 = the mode's (128 / 32;
 * per_token takes only 0). Local, not collective. */
commfuseStatus_t commfuseQuantize(const commfuseTensor_t* x, const char* mode, int64_t groupSize,
                                  const commfuseTensor_t* q, const commfuseTensor_t* scales);
/* output (q's shape, float32/float16/bfloat16) = q * scale, the map the ops apply; mode and
 * groupSize as for commfuseQuantize ("per_token_group", "mx" or "per_token"). */
commfuseStatus_t commfuseDequantize(const commfuseTensor_t* q, const commfuseTensor_t* scales,
                                    const char* mode, int64_t groupSize,
                                    const commfuseTensor_t* output);

#ifdef __cplusplus
}
#endif

#endif /* COMMFUSE_COMMFUSE_H_ */
