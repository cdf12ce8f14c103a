// Shared-memory segments: what a peer may attach to (docs/reliability.md, threat model).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <commfuse/commfuse.hpp>

#include <cstdlib>
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

// The name carries the owner's pid and launch id, so that a launcher can remove what a rank
// killed before the name exchange left (unlink_names_of), and nothing of another launch's
// process with the same pid; the mapping outlives the name.
TEST(Segment, NamesCarryTheOwnersPidAndLaunchAndCanBeRemovedByThem) {
  setenv("COMMFUSE_LAUNCH_ID", "a1b2c3", 1);  // read at create
  Segment owner = Segment::create(4096);
  unsetenv("COMMFUSE_LAUNCH_ID");
  const std::string prefix = "/commfuse-" + std::to_string(getpid()) + "-a1b2c3-";
  ASSERT_EQ(owner.name().compare(0, prefix.size(), prefix), 0) << owner.name();
  EXPECT_EQ(Segment::unlink_names_of(getpid() + 1000000, "a1b2c3"), 0);  // another pid
  EXPECT_EQ(Segment::unlink_names_of(getpid(), "0"), 0);  // the same pid, no launch id
  EXPECT_EQ(Segment::unlink_names_of(getpid(), "a1b2c3"), 1);
  EXPECT_EQ(Segment::unlink_names_of(getpid(), "a1b2c3"), 0);
  EXPECT_THROW(Segment::open(owner.name(), 4096), commfuse::RuntimeFailure);
  static_cast<char*>(owner.data())[0] = 1;  // still mapped
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
