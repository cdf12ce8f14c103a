// Shared-memory segments: what a peer may attach to (docs/reliability.md, threat model).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <commfuse/commfuse.hpp>

#include <string>

#include "comm/shm/segment.hpp"

namespace {

using commfuse::comm::shm::Segment;

TEST(Segment, PeerOpensTheOwnersSegment) {
  Segment owner = Segment::create(4096);
  static_cast<char*>(owner.data())[7] = 42;
  Segment peer = Segment::open(owner.name(), 4096);
  EXPECT_EQ(static_cast<char*>(peer.data())[7], 42);
}

// A segment of the expected name that others may read (or, by extension, that another
// user owns — not testable without a second uid) is refused, not mapped.
TEST(Segment, RefusesASegmentOthersCanRead) {
  const std::string name = "/commfuse-test-" + std::to_string(getpid());
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  ASSERT_EQ(fchmod(fd, 0644), 0);
  close(fd);
  try {
    Segment s = Segment::open(name, 4096);
    ADD_FAILURE() << "a 0644 segment was attached";
  } catch (const commfuse::RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("refusing to attach"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mode 644"), std::string::npos) << e.what();
  }
  shm_unlink(name.c_str());
}

}  // namespace
