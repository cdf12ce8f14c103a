// The one-shot entry points' workspace (ops/common/call_workspace.hpp): aligned, writable
// over its whole size, reused by the next call on the thread, a nested call's apart, and
// large ones whole 2 MiB pages (offered to transparent huge pages).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>

#include "core/build_info.hpp"
#include "ops/common/call_workspace.hpp"

namespace {

using commfuse::ops::CallWorkspace;

constexpr size_t kHugePage = size_t{2} << 20;

uintptr_t address(const CallWorkspace& w) {
  return reinterpret_cast<uintptr_t>(w.data());
}

// The buffer is per thread: each test runs on a fresh thread so that it starts with none,
// whatever ran before it in this process.
void on_fresh_thread(const std::function<void()>& body) {
  std::thread(body).join();
}

// Every byte written and read back: the mapping covers the whole request.
void fill_and_check(const CallWorkspace& w, size_t bytes, uint8_t value) {
  auto* p = static_cast<uint8_t*>(w.data());
  std::memset(p, value, bytes);
  EXPECT_EQ(p[0], value);
  EXPECT_EQ(p[bytes / 2], value);
  EXPECT_EQ(p[bytes - 1], value);
}

TEST(CallWorkspace, EmptyRequestHasNoMemory) {
  const CallWorkspace w(0);
  EXPECT_EQ(w.data(), nullptr);
}

TEST(CallWorkspace, SmallRequestsAre64ByteAlignedAndReused) {
  on_fresh_thread([] {
    uintptr_t first = 0;
    {
      const CallWorkspace w(1000);
      ASSERT_NE(w.data(), nullptr);
      EXPECT_EQ(address(w) % 64, 0u);
      fill_and_check(w, 1000, 0x5a);
      first = address(w);
    }
    const CallWorkspace again(800);  // fits the thread's buffer: the same memory
    EXPECT_EQ(address(again), first);
  });
}

TEST(CallWorkspace, LargeRequestsAreWholeHugePages) {
  on_fresh_thread([] {
    const size_t bytes = 3 * kHugePage + 12345;
    const CallWorkspace w(bytes);
    ASSERT_NE(w.data(), nullptr);
    EXPECT_EQ(address(w) % 64, 0u);
    // The sanitizer builds keep every workspace on the heap (redzones): no page alignment.
    if (!commfuse::build::sanitized()) {
      EXPECT_EQ(address(w) % kHugePage, 0u);
    }
    fill_and_check(w, bytes, 0xa5);
  });
}

TEST(CallWorkspace, NestedRequestGetsItsOwnMemory) {
  on_fresh_thread([] {
    const size_t outer_bytes = kHugePage + 64, inner_bytes = 2 * kHugePage;
    const CallWorkspace outer(outer_bytes);
    fill_and_check(outer, outer_bytes, 0x11);
    {
      const CallWorkspace inner(inner_bytes);
      ASSERT_NE(inner.data(), nullptr);
      const uintptr_t a = address(outer), b = address(inner);
      EXPECT_TRUE(b >= a + outer_bytes || b + inner_bytes <= a) << "the buffers overlap";
      fill_and_check(inner, inner_bytes, 0x22);
    }
    // The inner one's memory was its own: the outer buffer is untouched.
    const auto* p = static_cast<const uint8_t*>(outer.data());
    EXPECT_EQ(p[0], 0x11);
    EXPECT_EQ(p[outer_bytes - 1], 0x11);
  });
}

TEST(CallWorkspace, GrowsPastItsBufferAndKeepsWorking) {
  on_fresh_thread([] {
    { const CallWorkspace small(4096); }
    const size_t bytes = 5 * kHugePage;
    const CallWorkspace big(bytes);
    ASSERT_NE(big.data(), nullptr);
    fill_and_check(big, bytes, 0x33);
  });
}

}  // namespace
