#include "core/params.hpp"

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "core/error.hpp"

namespace commfuse::params {
namespace {

constexpr std::array<Param, 22> kParams{{
    {"COMMFUSE_LOG", Kind::kChoice, "warn", "error|warn|info|debug",
     "log level; lines go to stderr prefixed host:pid:rank"},
    {"COMMFUSE_TIMEOUT_S", Kind::kInt, "300", "",
     "seconds any wait for a peer may take before the op fails with RUNTIME_ERROR", 1, 86400},
    {"COMMFUSE_NUM_THREADS", Kind::kInt, "0", "",
     "compute threads per rank; 0 = max(1, cores / local ranks)", 0, 1024},
    {"COMMFUSE_TRACE", Kind::kString, "", "",
     "path of a Chrome-trace JSON file to write (empty = tracing off)"},
    {"COMMFUSE_TRANSPORT", Kind::kChoice, "auto", "auto|shm|mpi",
     "transport between ranks: auto = shm on one host, MPI across hosts"},
    {"COMMFUSE_SHM_SLOT_BYTES", Kind::kInt, "4194304", "",
     "bytes of each of a rank's two shared-memory slots (collectives move data in steps of this)",
     4096, int64_t{1} << 30, 64},
    {"COMMFUSE_NONTEMPORAL_BYTES", Kind::kInt, "0", "",
     "copies (and float32 quantized-reduction outputs) of at least this many bytes use "
     "non-temporal stores; 0 = this core's share of the last-level cache, within [1 MiB, "
     "16 MiB]"},
    {"COMMFUSE_COPY_LOOP", Kind::kChoice, "auto", "auto|all|none",
     "bulk copies below the non-temporal size: auto = glibc memcpy except at the distances of "
     "destination past source (modulo 4 KiB) where it measured over 2x slower than the vector "
     "loop (commfuse info), the loop there, and shm CMA reads of 4 KiB or more at the "
     "distances where process_vm_readv measured slow through a buffer at the source's page "
     "offset; all = the loop and the buffer at every distance; none = memcpy and direct "
     "reads everywhere"},
    {"COMMFUSE_HOST_ID", Kind::kString, "", "",
     "pretend this process runs on the named host (tests of the multi-host paths)"},
    {"COMMFUSE_LAUNCH_ID", Kind::kString, "", "",
     "set by commfuse launch / commfuse.spawn for their ranks: put into shared-memory segment "
     "names, so that the launcher removes only its own ranks' leftovers"},
    {"COMMFUSE_VERBOSE", Kind::kInt, "0", "",
     "1 = print each distinct algorithm/schedule decision once (like ONEDNN_VERBOSE); 2 = every "
     "decision, as made",
     0, 2},
    {"COMMFUSE_ALLTOALL_GEMM_ROWS", Kind::kInt, "0", "",
     "token rows per GEMM chunk of alltoall(_quant)_matmul; 0 = one GEMM on shm, 1024 otherwise"},
    {"COMMFUSE_HALF_GEMM", Kind::kChoice, "auto", "auto|native|float32",
     "fp16/bf16 GEMMs: auto = oneDNN's native kernel or widened to fp32, whichever a once-per-"
     "process measurement says is faster; native or float32 pins it (same bits run to run)"},
    {"COMMFUSE_PACK_X2", Kind::kChoice, "auto", "auto|always|never",
     "x2 packed once per call into the native GEMM's blocked layout (16-bit, and int8 for "
     "oneDNN's s8 kernel): auto = when the call multiplies it several times or in blocks of "
     "64+ rows (int8 never through oneDNN's reorder); always or never pins it"},
    {"COMMFUSE_DETERMINISTIC", Kind::kChoice, "0", "0|1",
     "1: no kernel chosen by timing (COMMFUSE_F32_GEMM and COMMFUSE_HALF_GEMM auto become onednn "
     "and native), so a rerun gives the same bits; 0: the faster kernel, as measured once per "
     "process"},
    {"COMMFUSE_F32_GEMM", Kind::kChoice, "auto", "auto|onednn|openblas",
     "fp32 GEMMs: auto = oneDNN or OpenBLAS (when libopenblas.so.0 loads), whichever a once-per-"
     "process measurement says is faster; onednn or openblas pins it"},
    {"COMMFUSE_INT8_GEMM", Kind::kChoice, "auto", "auto|madd16|f32-blocked",
     "exact int8 x int8 GEMMs where oneDNN's s8 kernel saturates (no VNNI/AMX): auto = AVX2's "
     "vpmaddwd kernel or k-blocked fp32, whichever a once-per-process probe says is faster; "
     "madd16 (needs AVX2) or f32-blocked pins it"},
    {"COMMFUSE_MAX_CPU_ISA", Kind::kChoice, "all",
     "sse41|avx2|avx2_vnni|avx512_core|avx512_core_vnni|avx512_core_bf16|avx512_core_fp16|"
     "avx512_core_amx|all",
     "newest CPU ISA commfuse's kernels may use (older paths on a newer CPU); also caps oneDNN "
     "when ONEDNN_MAX_CPU_ISA is unset"},
    {"COMMFUSE_ALGO", Kind::kString, "", "",
     "force operator algorithms: <op>:<name>[,<op>:<name>...], e.g. all_gather_matmul:unfused "
     "(same on every rank)"},
    {"COMMFUSE_MPI_PROGRESS_THREAD", Kind::kChoice, "auto", "auto|on|off",
     "MPI transport: a fused operator's transfers polled by a thread of their own while the "
     "caller computes; auto = only where the ranks' compute threads leave a core of the host "
     "free (else the caller polls between its pieces); on or off pins it"},
    {"COMMFUSE_DEVICE_TRANSPORT", Kind::kChoice, "auto", "auto|ipc|nccl",
     "exchange of CUDA device calls: auto = CUDA IPC with every rank on one host, NCCL "
     "across hosts; ipc or nccl pins it"},
    {"COMMFUSE_FAULT", Kind::kString, "", "",
     "fault injection for tests: <rank>:<op>:<piece>:<kill|stall|exit> makes that rank die, "
     "hang or exit at piece/step <piece> of operator or collective <op>"},
}};

const Param& find(std::string_view env) {
  for (const auto& p : kParams)
    if (p.env == env) return p;
  detail::throw_status(Status::kInner, detail::cat("unknown parameter ", env));
}

std::string raw_value(const Param& p) {
  const char* v = std::getenv(std::string(p.env).c_str());
  return v != nullptr ? std::string(v) : std::string(p.default_value);
}

bool choice_allowed(std::string_view choices, std::string_view value) {
  size_t start = 0;
  while (start <= choices.size()) {
    const size_t bar = choices.find('|', start);
    const size_t end = bar == std::string_view::npos ? choices.size() : bar;
    if (choices.substr(start, end - start) == value) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::span<const Param> all() {
  return kParams;
}

std::string get_string(std::string_view env) {
  const Param& p = find(env);
  std::string value = raw_value(p);
  // Choices are lower case; accept any case (oneDNN spells its ISA names in upper case).
  if (p.kind == Kind::kChoice)
    for (char& ch : value) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (p.kind == Kind::kChoice)
    CF_CHECK_ARG(choice_allowed(p.choices, value), p.env, "='", value, "' is not one of ",
                 p.choices);
  return value;
}

int64_t get_int(std::string_view env) {
  const Param& p = find(env);
  CF_ASSERT(p.kind == Kind::kInt);
  const std::string value = raw_value(p);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  const int err = errno;  // before any other call may set it
  // Digits only: strtoll also takes leading blanks and a sign (" 5", "+5" passed, "5 " did not).
  CF_CHECK_ARG(!value.empty() && std::isdigit(static_cast<unsigned char>(value[0])) &&
                   end != nullptr && *end == '\0',
               p.env, "='", value, "' is not a non-negative integer");
  // Digits past 2^63 - 1 (ERANGE) are an integer out of range, not "not an integer". The
  // message's arguments are formatted only on failure (CF_CHECK_ARG).
  CF_CHECK_ARG(err == 0 && v >= p.min && v <= p.max && v % p.multiple == 0, p.env, "=", value,
               " must be ",
               range_text(p).empty() ? std::string("at most 2^63 - 1") : range_text(p));
  return v;
}

std::string range_text(const Param& p) {
  if (p.kind != Kind::kInt || (p.min == 0 && p.max == std::numeric_limits<int64_t>::max()))
    return "";
  std::string text = p.multiple > 1 ? detail::cat("a multiple of ", p.multiple, " ") : "";
  return text + detail::cat("in [", p.min, ", ", p.max, "]");
}

int timeout_seconds() {
  return static_cast<int>(get_int("COMMFUSE_TIMEOUT_S"));
}

std::string kernel_pin(std::string_view env, const char* fixed) {
  std::string v = get_string(env);
  if (v == "auto" && get_string("COMMFUSE_DETERMINISTIC") == "1") v = fixed;
  return v;
}

int num_threads_override() {
  return static_cast<int>(get_int("COMMFUSE_NUM_THREADS"));
}

size_t shm_slot_bytes() {
  return static_cast<size_t>(get_int("COMMFUSE_SHM_SLOT_BYTES"));
}

void check(std::string_view env) {
  if (find(env).kind == Kind::kInt) get_int(env);
  get_string(env);  // a choice's allowed values
}

}  // namespace commfuse::params
