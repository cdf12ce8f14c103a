// Communicator creation errors that a single process can provoke.
#include <gtest/gtest.h>

#include <commfuse/commfuse.h>
#include <commfuse/commfuse.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

TEST(CommInit, RankOutOfRangeIsParamInvalid) {
  try {
    commfuse::Comm c(2, 2, "tcp://127.0.0.1:" + std::to_string(free_port()));
    FAIL();
  } catch (const commfuse::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos) << e.what();
  }
}

TEST(CommInit, SingleRankCommWorksAndIsFoundByName) {
  commfuse::Comm c(0, 1, "tcp://127.0.0.1:" + std::to_string(free_port()));
  EXPECT_EQ(c.world_size(), 1);
  EXPECT_STREQ(c.transport_name(), "shm");
  EXPECT_EQ(&commfuse::find_comm(c.name()), &c);
  float x[3] = {1, 2, 3}, y[3] = {};
  c.all_reduce(x, y, 3, commfuse::DType::kFloat32);
  EXPECT_EQ(y[2], 3.0f);
}

// Kernel dispatch and logging read these leniently (a warning, then no cap, "warn", quiet):
// a communicator refuses them, naming the variable, so a mistyped cap cannot run uncapped.
TEST(CommInit, BadProcessWideSettingsAreRefused) {
  const char* bad[][2] = {
      {"COMMFUSE_MAX_CPU_ISA", "avx3"}, {"COMMFUSE_LOG", "loud"}, {"COMMFUSE_VERBOSE", "yes"}};
  for (const auto& [name, value] : bad) {
    const char* old = std::getenv(name);
    const std::string saved = old != nullptr ? old : "";
    setenv(name, value, 1);
    try {
      commfuse::Comm c(0, 1, "tcp://127.0.0.1:" + std::to_string(free_port()));
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const commfuse::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
    if (old != nullptr)
      setenv(name, saved.c_str(), 1);
    else
      unsetenv(name);
  }
}

TEST(CommInit, UnknownGroupNameIsParamInvalid) {
  try {
    commfuse::find_comm("no-such-group");
    FAIL();
  } catch (const commfuse::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-group"), std::string::npos);
  }
}

TEST(CommInit, CApiReportsBadInitMethod) {
  commfuseComm_t comm = nullptr;
  EXPECT_EQ(commfuseCommInitRank(0, 1, "udp://x", &comm), COMMFUSE_PARAM_INVALID);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(commfuseGetLastErrorMessage()).find("udp://x"), std::string::npos)
      << commfuseGetLastErrorMessage();
  EXPECT_EQ(commfuseCommInitRank(0, 1, nullptr, &comm), COMMFUSE_PARAM_NULLPTR);
  EXPECT_EQ(commfuseAllReduce(nullptr, nullptr, 0, COMMFUSE_FLOAT32, nullptr),
            COMMFUSE_PARAM_NULLPTR);
}

TEST(CommInit, BadArgumentOnSingleRankComm) {
  commfuse::Comm c(0, 1, "tcp://127.0.0.1:" + std::to_string(free_port()));
  float x[2] = {};
  EXPECT_THROW(c.all_reduce(x, x, 2, commfuse::DType::kHiFloat8), commfuse::InvalidArgument);
  // A rejected call leaves the communicator usable (issue 14); abort() does not.
  EXPECT_TRUE(c.usable()) << c.failure();
  x[0] = 3.0f;
  c.all_reduce(x, x, 2, commfuse::DType::kFloat32);
  EXPECT_EQ(x[0], 3.0f);
  c.abort("test");
  EXPECT_FALSE(c.usable());
  EXPECT_NE(c.failure().find("aborted the communicator: test"), std::string::npos) << c.failure();
  EXPECT_THROW(c.broadcast(x, 2, commfuse::DType::kFloat32, 0), commfuse::RuntimeFailure)
      << "an aborted communicator refuses calls";
}

// commfuseCommDestroy from another thread (a watchdog's) while an operator runs on that
// communicator: the operator names its group, not the handle, and used to find the
// communicator with no hold on it, so the destroy freed it under the call (ASan:
// heap-use-after-free in CommImpl::transport; release: a crash). Now the call holds it: it
// completes (or, should the destroy come first, is refused naming the group), the
// communicator goes when it returns, and a later call naming the group is refused.
TEST(CommInit, CApiDestroyDuringAnOperatorWaitsForIt) {
  commfuseComm_t comm = nullptr;
  const std::string init = "tcp://127.0.0.1:" + std::to_string(free_port());
  ASSERT_EQ(commfuseCommInitRank(0, 1, init.c_str(), &comm), COMMFUSE_SUCCESS)
      << commfuseGetLastErrorMessage();
  char name[COMMFUSE_COMM_NAME_MAX];
  ASSERT_EQ(commfuseCommGetName(comm, name), COMMFUSE_SUCCESS);
  const int64_t m = 2048, k = 2048, n = 2048;  // about 17 GFLOP: 0.1 s or more
  std::vector<float> x1(m * k, 1.0f), x2(k * n, 1.0f), out(m * n, 0.0f);
  auto tensor = [](int64_t rows, int64_t cols, float* data) {
    const int64_t shape[] = {rows, cols};
    return commfuseCreateTensor(shape, 2, nullptr, COMMFUSE_FLOAT32, data);
  };
  commfuseTensor_t* t1 = tensor(m, k, x1.data());
  commfuseTensor_t* t2 = tensor(k, n, x2.data());
  commfuseTensor_t* to = tensor(m, n, out.data());
  uint64_t ws = 0;
  commfuseOpExecutor_t* ex = nullptr;
  ASSERT_EQ(
      commfuseMatmulAllReduceGetWorkspaceSize(t1, t2, nullptr, name, "sum", 0, 1, to, &ws, &ex),
      COMMFUSE_SUCCESS)
      << commfuseGetLastErrorMessage();
  std::vector<char> workspace(ws + 64);
  std::thread watchdog([comm] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(commfuseCommDestroy(comm), COMMFUSE_SUCCESS) << commfuseGetLastErrorMessage();
  });
  const commfuseStatus_t st = commfuseMatmulAllReduce(workspace.data(), ws, ex, nullptr);
  const std::string message = st == COMMFUSE_SUCCESS ? "" : commfuseGetLastErrorMessage();
  watchdog.join();
  if (st == COMMFUSE_SUCCESS) {
    EXPECT_EQ(out[0], static_cast<float>(k));
    EXPECT_EQ(out[m * n - 1], static_cast<float>(k));
  } else {
    EXPECT_EQ(st, COMMFUSE_PARAM_INVALID) << message;
    EXPECT_NE(message.find("was destroyed"), std::string::npos) << message;
  }
  ex = nullptr;
  EXPECT_EQ(
      commfuseMatmulAllReduceGetWorkspaceSize(t1, t2, nullptr, name, "sum", 0, 1, to, &ws, &ex),
      COMMFUSE_PARAM_INVALID);
  const std::string later = commfuseGetLastErrorMessage();
  EXPECT_NE(later.find(std::string("group '") + name + "' was destroyed"), std::string::npos)
      << later;
  EXPECT_EQ(ex, nullptr);
  // A null group: the outputs are cleared all the same (they were left as they were).
  ex = reinterpret_cast<commfuseOpExecutor_t*>(uintptr_t{0xdead});
  ws = 7;
  EXPECT_EQ(
      commfuseMatmulAllReduceGetWorkspaceSize(t1, t2, nullptr, nullptr, "sum", 0, 1, to, &ws, &ex),
      COMMFUSE_PARAM_NULLPTR);
  EXPECT_EQ(ex, nullptr);
  EXPECT_EQ(ws, 0u);
  commfuseDestroyTensor(t1);
  commfuseDestroyTensor(t2);
  commfuseDestroyTensor(to);
}

// Two threads of one process as rank 0 and rank 1 of one group: the operators find a
// communicator by its name, which both would share, so an operator on one thread ran on the
// other's rank and waited until the timeout ("all_reduce(rank 1): timed out ... waiting for
// rank 0"). The second to register is refused naming the rank this process holds; the first
// one's peer is then gone, which its next call reports at once naming it (a wait until
// COMMFUSE_TIMEOUT_S, 120 s here, would end "timed out" instead).
TEST(CommInit, SecondRankOfAGroupInOneProcessIsRefused) {
  const char* old = std::getenv("COMMFUSE_TIMEOUT_S");
  const std::string saved = old != nullptr ? old : "";
  setenv("COMMFUSE_TIMEOUT_S", "120", 1);
  const std::string init = "tcp://127.0.0.1:" + std::to_string(free_port());
  std::unique_ptr<commfuse::Comm> comms[2];
  std::string refusals[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        comms[r] = std::make_unique<commfuse::Comm>(r, 2, init);
      } catch (const commfuse::InvalidArgument& e) {
        refusals[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  if (old != nullptr)
    setenv("COMMFUSE_TIMEOUT_S", saved.c_str(), 1);
  else
    unsetenv("COMMFUSE_TIMEOUT_S");
  ASSERT_NE(comms[0] == nullptr, comms[1] == nullptr) << "exactly one is refused";
  const int kept = comms[0] ? 0 : 1, refused = 1 - kept;
  EXPECT_NE(refusals[refused].find(std::string("comm init(rank ") + std::to_string(refused) +
                                   "): this process already holds rank " + std::to_string(kept) +
                                   " of this group"),
            std::string::npos)
      << refusals[refused];
  commfuse::Comm& c = *comms[kept];
  EXPECT_EQ(&commfuse::find_comm(c.name()), &c);  // the name finds the one this process holds
  float x = 1, y = 0;
  try {
    c.all_reduce(&x, &y, 1, commfuse::DType::kFloat32);
    ADD_FAILURE() << "an all_reduce without its peer succeeded";
  } catch (const commfuse::RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(refused) +
                                         " destroyed the communicator"),
              std::string::npos)
        << e.what();
  }
}
