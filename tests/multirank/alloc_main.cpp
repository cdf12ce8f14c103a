// A collective allocates nothing once warm: no operator new on the calling thread per call,
// on either transport, at a small size and at sizes past the shm slots and MPI's descriptor
// message, including calls where a peer is late, so that the waiting ranks go past their
// spinning into the liveness checks. An allocation per call is where per-call formatting
// shows up first (a message prefix built eagerly through an ostringstream cost ~0.5 us per
// call, 905cf9a), and a 64 B shm all_reduce takes 0.4 us. Out of place, at W <= 8 (a batch
// of more than 32 MPI requests spills to the heap); an in-place all_to_all, or an all_gather
// whose source overlaps another rank's block of its destination, stages a copy of the
// source per call by design.
//
// Its own executable (started like commfuse_rank_tests, by commfuse launch or mpirun):
// replacing the global operator new and delete changes them for the whole program, every
// form replaced so that each allocation is freed by its own kind (under ASan a nothrow new
// left to ASan and a delete replaced here aborted with alloc-dealloc-mismatch). Counted on
// the thread that asked, while it counts.
#include <commfuse/commfuse.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

thread_local bool t_counting = false;
thread_local long t_news = 0;

void* counted(std::size_t n) noexcept {
  if (t_counting) ++t_news;
  return std::malloc(n == 0 ? 1 : n);
}
void* counted_aligned(std::size_t n, std::align_val_t a) noexcept {
  if (t_counting) ++t_news;
  const auto align = static_cast<std::size_t>(a);
  return std::aligned_alloc(align, (n + align - 1) / align * align);  // a multiple, as required
}

}  // namespace

void* operator new(std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return counted(n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return counted(n);
}
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = counted_aligned(n, a)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
  if (void* p = counted_aligned(n, a)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_aligned(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_aligned(n, a);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}

using commfuse::DType;

namespace {

int no_alloc(commfuse::Comm& c) {
  int failures = 0;
  const int R = c.world_size(), me = c.rank();
  for (const size_t n : {size_t{1}, size_t{1000}, size_t{70001}}) {
    std::vector<float> x(n * static_cast<size_t>(R), static_cast<float>(me + 1));
    std::vector<float> y(n * static_cast<size_t>(R));
    int root = 0;
    const std::pair<const char*, std::function<void()>> calls[] = {
        {"all_reduce", [&] { c.all_reduce(x.data(), y.data(), n, DType::kFloat32); }},
        {"all_reduce in place", [&] { c.all_reduce(y.data(), y.data(), n, DType::kFloat32); }},
        {"all_gather", [&] { c.all_gather(x.data(), y.data(), n, DType::kFloat32); }},
        {"reduce_scatter", [&] { c.reduce_scatter(x.data(), y.data(), n, DType::kFloat32); }},
        {"all_to_all", [&] { c.all_to_all(x.data(), y.data(), n, DType::kFloat32); }},
        {"broadcast", [&] { c.broadcast(y.data(), n, DType::kFloat32, root++ % R); }},
        {"barrier", [&] { c.barrier(); }},
    };
    for (const auto& [op, call] : calls) {
      for (int i = 0; i < 3; ++i) call();  // buffers sized, algorithms chosen
      long news = 0;
      for (int i = 0; i < 20; ++i) {
        // Every fourth call a rank is 2 ms late: the others wait past their spinning.
        if (i % 4 == 3 && me == i / 4 % R)
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        t_news = 0;
        t_counting = true;
        call();
        t_counting = false;
        news += t_news;
      }
      if (news != 0) {
        ++failures;
        std::fprintf(stderr,
                     "FAILED rank %d: %s of %zu float32: %ld operator new calls in 20 calls\n", me,
                     op, n, news);
      }
    }
    // The data moved all along: the last all_reduce of x gives the sum of the ranks' values.
    c.all_reduce(x.data(), y.data(), n, DType::kFloat32);
    const auto want = static_cast<float>(R * (R + 1) / 2);
    if (y[n - 1] != want) {
      ++failures;
      std::fprintf(stderr, "FAILED rank %d: all_reduce of %zu gave %g, not %g\n", me, n,
                   static_cast<double>(y[n - 1]), static_cast<double>(want));
    }
  }
  return failures;
}

}  // namespace

int main() {
  try {
    auto comm = commfuse::Comm::from_env();
    const int failures = no_alloc(*comm);
    if (failures == 0)
      std::printf("rank %d: no_alloc OK (world %d, transport %s)\n", comm->rank(),
                  comm->world_size(), comm->transport_name());
    std::fflush(stdout);
    return failures == 0 ? 0 : 1;
  } catch (const commfuse::Error& e) {
    std::fprintf(stderr, "unexpected error %d: %s\n", static_cast<int>(e.code()), e.what());
    return 1;
  }
}
