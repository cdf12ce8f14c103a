// SmallVector (core/small_vector.hpp): inline storage up to N elements, the heap beyond,
// the same contents either way.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/small_vector.hpp"

namespace {

TEST(SmallContainers, SmallVectorKeepsItsElementsAcrossGrowth) {
  commfuse::SmallVector<int64_t, 4> v;
  EXPECT_TRUE(v.empty());
  const int64_t* inline_data = v.data();
  for (int64_t i = 0; i < 4; ++i) v.push_back(i * 7);
  EXPECT_EQ(v.data(), inline_data) << "N elements fit inline";
  for (int64_t i = 4; i < 37; ++i) v.push_back(i * 7);  // grows 4 -> 8 -> 16 -> 32 -> 64
  ASSERT_EQ(v.size(), 37u);
  EXPECT_NE(v.data(), inline_data);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<int64_t>(i) * 7) << i;
  int64_t sum = 0;
  for (const int64_t x : v) sum += x;
  EXPECT_EQ(sum, 7 * (36 * 37 / 2));
  v.push_back(v[3]);  // an element of itself, while growing: copied before the move
  ASSERT_EQ(v.size(), 38u);
  EXPECT_EQ(v[37], 21);
  v.clear();
  EXPECT_TRUE(v.empty());
  v.push_back(-1);
  EXPECT_EQ(v[0], -1);
}

TEST(SmallContainers, SizedSmallVectorIsValueInitializedInlineAndOnTheHeap) {
  for (const size_t n : {size_t{0}, size_t{3}, size_t{16}, size_t{17}, size_t{100}}) {
    commfuse::SmallVector<int, 16> a(n);
    ASSERT_EQ(a.size(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], 0) << "n " << n << " at " << i;
    for (size_t i = 0; i < n; ++i) a[i] = static_cast<int>(i);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(a.data()[i], static_cast<int>(i));
    a.push_back(-7);  // grows past a sized start, inline or not
    ASSERT_EQ(a.size(), n + 1);
    EXPECT_EQ(a[n], -7);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], static_cast<int>(i)) << "after push_back";
  }
}

}  // namespace
