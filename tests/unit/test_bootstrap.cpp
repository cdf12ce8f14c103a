// Bootstrap tests. Ranks are threads of this process (the transport is real TCP, so that
// is a real group) or forked children where a process must really die.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/host_identity.hpp"
#include "comm/bootstrap/init_method.hpp"
#include "comm/bootstrap/wire.hpp"
#include "core/scoped_env.hpp"

using commfuse::Status;
using commfuse::comm::Bootstrap;
using commfuse::comm::InitKind;
using commfuse::comm::parse_init_method;

namespace {

using Clock = std::chrono::steady_clock;

using commfuse::detail::ScopedEnv;

// A port that was free a moment ago: bind port 0 and ask which port the kernel chose.
int free_port(int family = AF_INET) {
  const int fd = socket(family, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    len = sizeof(*a);
  }
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
    port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  close(fd);
  return port;
}

// What one rank saw.
struct Outcome {
  bool ok = false;
  Status code = Status::kSuccess;
  std::string message;
  std::vector<std::string> result;
};

// Runs body(i) in one thread per entry, i = 0..n-1, and collects what each one saw.
std::vector<Outcome> run_threads(int n, const std::function<std::vector<std::string>(int)>& body) {
  std::vector<Outcome> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      Outcome& o = out[static_cast<size_t>(i)];
      try {
        o.result = body(i);
        o.ok = true;
      } catch (const commfuse::Error& e) {
        o.code = e.code();
        o.message = e.what();
      } catch (const std::exception& e) {
        o.code = Status::kInner;
        o.message = std::string("unexpected exception: ") + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// A blob that differs by rank and size, so a mix-up of ranks or lengths shows.
std::string blob_for(int rank, size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + rank * 7 + 1) & 0xff);
  return s;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Waits for a forked child with a deadline (killing it after), returns its exit code or -1.
int reap(pid_t pid, std::chrono::seconds limit) {
  const auto until = Clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// One attempt to connect to port on the loopback: the socket, or -1 (nothing listens yet).
int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
  close(fd);
  return -1;
}

// A socket connected to the bootstrap port on the loopback (retrying while rank 0 is not yet
// listening) that has sent a valid hello for `rank` of `world`; -1 if none could be made.
int raw_hello(int port, int rank, int world) {
  for (int i = 0; i < 400; ++i) {
    if (const int fd = connect_loopback(port); fd >= 0) {
      int err = 0;
      if (commfuse::comm::wire::send_frame(
              fd, commfuse::comm::wire::FrameType::kHello, 0,
              commfuse::comm::wire::encode_hello(rank, world),
              commfuse::comm::net::Deadline::after(std::chrono::seconds(5)),
              &err) == commfuse::comm::net::Io::kOk)
        return fd;
      close(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Expects parse_init_method to throw InvalidArgument whose message contains every part.
void expect_rejected(std::string_view spec, int rank, int world_size,
                     const std::vector<std::string>& parts) {
  try {
    parse_init_method(spec, rank, world_size);
    ADD_FAILURE() << "accepted " << spec;
  } catch (const commfuse::InvalidArgument& e) {
    for (const auto& p : parts) EXPECT_TRUE(contains(e.what(), p)) << e.what() << " / " << p;
  }
}

}  // namespace

// ---- init_method ----

TEST(InitMethod, ParsesTcpForms) {
  auto m = parse_init_method("tcp://127.0.0.1:29500", 1, 4);
  EXPECT_EQ(m.kind, InitKind::kTcp);
  EXPECT_EQ(m.host, "127.0.0.1");
  EXPECT_EQ(m.port, 29500);
  EXPECT_EQ(m.rank, 1);
  EXPECT_EQ(m.world_size, 4);
  m = parse_init_method("tcp://node-7.cluster.example:65535", 0, 1);
  EXPECT_EQ(m.host, "node-7.cluster.example");
  EXPECT_EQ(m.port, 65535);
  m = parse_init_method("tcp://[::1]:1", 3, 8);
  EXPECT_EQ(m.host, "::1");
  EXPECT_EQ(m.port, 1);
  m = parse_init_method("tcp://[fe80::1%eth0]:29500", 0, 2);
  EXPECT_EQ(m.host, "fe80::1%eth0");
}

TEST(InitMethod, RejectsMalformedTcp) {
  expect_rejected("tcp://", 0, 1, {"tcp://host:port"});
  expect_rejected("tcp://host", 0, 1, {"no port"});
  expect_rejected("tcp://host:", 0, 1, {"port", "[1, 65535]"});
  expect_rejected("tcp://host:0", 0, 1, {"'0'"});
  expect_rejected("tcp://host:65536", 0, 1, {"'65536'"});
  expect_rejected("tcp://host:12ab", 0, 1, {"'12ab'"});
  expect_rejected("tcp://host:-5", 0, 1, {"'-5'"});
  expect_rejected("tcp://host:29500/path", 0, 1, {"'29500/path'"});
  expect_rejected("tcp://:29500", 0, 1, {"empty host"});
  expect_rejected("tcp://[::1:29500", 0, 1, {"IPv6"});
  expect_rejected("tcp://[::1]29500", 0, 1, {"IPv6"});
  expect_rejected("tcp://::1:29500", 0, 1, {"brackets"});
  expect_rejected("tcp://us er@host:1", 0, 1, {"host"});
}

TEST(InitMethod, TcpRankAndWorldSizeComeFromArguments) {
  expect_rejected("tcp://h:1", 4, 4, {"rank is 4", "world_size is 4"});
  expect_rejected("tcp://h:1", 7, 4, {"rank is 7", "world_size is 4"});
  expect_rejected("tcp://h:1", -1, 4, {"rank is -1", "world_size is 4"});
  expect_rejected("tcp://h:1", 0, 0, {"world_size is 0", ">= 1"});
  expect_rejected("tcp://h:1", 0, -1, {"world_size is -1"});
}

TEST(InitMethod, EnvReadsTheTorchVariables) {
  ScopedEnv a("MASTER_ADDR", "10.1.2.3"), p("MASTER_PORT", "29501"), r("RANK", "2"),
      w("WORLD_SIZE", "4");
  auto m = parse_init_method("env://", -1, -1);
  EXPECT_EQ(m.kind, InitKind::kEnv);
  EXPECT_EQ(m.host, "10.1.2.3");
  EXPECT_EQ(m.port, 29501);
  EXPECT_EQ(m.rank, 2);
  EXPECT_EQ(m.world_size, 4);
  // Arguments that agree are fine; ones that disagree name both values.
  EXPECT_EQ(parse_init_method("env://", 2, 4).rank, 2);
  expect_rejected("env://", 1, -1, {"rank argument is 1", "RANK=2"});
  expect_rejected("env://", -1, 8, {"world_size argument is 8", "WORLD_SIZE=4"});
  {
    ScopedEnv v6("MASTER_ADDR", "::1");
    EXPECT_EQ(parse_init_method("env://", -1, -1).host, "::1");
  }
  {
    ScopedEnv v6("MASTER_ADDR", "[::1]");
    EXPECT_EQ(parse_init_method("env://", -1, -1).host, "::1");
  }
  {
    ScopedEnv bad("RANK", "4");
    expect_rejected("env://", -1, -1, {"rank is 4", "world_size is 4"});
  }
  {
    ScopedEnv bad("RANK", "two");
    expect_rejected("env://", -1, -1, {"RANK='two' is not an integer in [0, 2^30]"});
  }
  {  // a non-negative integer, too large: the message had said it was not one
    ScopedEnv big("WORLD_SIZE", "99999999999");
    expect_rejected("env://", -1, -1, {"WORLD_SIZE='99999999999' is not an integer in [0, 2^30]"});
  }
  {
    ScopedEnv bad("MASTER_PORT", "99999");
    expect_rejected("env://", -1, -1, {"MASTER_PORT", "99999"});
  }
}

TEST(InitMethod, EnvNamesTheMissingVariable) {
  ScopedEnv a("MASTER_ADDR", "h"), p("MASTER_PORT", "29500"), r("RANK", "0"), w("WORLD_SIZE", "2");
  for (const char* var : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}) {
    ScopedEnv gone(var, nullptr);
    expect_rejected("env://", -1, -1, {var, "not set"});
  }
  // An unset RANK / WORLD_SIZE may be supplied by the argument instead.
  ScopedEnv no_rank("RANK", nullptr);
  EXPECT_EQ(parse_init_method("env://", 1, -1).rank, 1);
}

TEST(InitMethod, MpiLeavesRankAndSizeToMpi) {
  auto m = parse_init_method("mpi", -1, -1);
  EXPECT_EQ(m.kind, InitKind::kMpi);
  EXPECT_EQ(m.rank, -1);
  EXPECT_EQ(m.world_size, -1);
  EXPECT_EQ(parse_init_method("mpi", 3, 8).rank, 3);
}

TEST(InitMethod, UnknownFormsListTheAcceptedOnes) {
  for (const char* s :
       {"", "gloo://h:1", "file:///tmp/x", "TCP://h:1", "env:/", "mpi://", "tcp:/h:1"})
    expect_rejected(s, 0, 1, {"tcp://host:port", "env://", "mpi"});
}

// ---- host identity ----

TEST(BootstrapHostIdentity, ALineBreakInTheOverrideIsRefused) {
  ScopedEnv two_lines("COMMFUSE_HOST_ID", "node-a\nnode-b");
  try {
    commfuse::comm::host_identity();
    ADD_FAILURE() << "accepted a host id with a line break";
  } catch (const commfuse::InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "COMMFUSE_HOST_ID")) << e.what();
  }
}

TEST(BootstrapHostIdentity, StableAndOverridable) {
  {
    ScopedEnv unset("COMMFUSE_HOST_ID", nullptr);
    const std::string id = commfuse::comm::host_identity();
    EXPECT_FALSE(id.empty());
    EXPECT_EQ(id, commfuse::comm::host_identity());
  }
  ScopedEnv fake("COMMFUSE_HOST_ID", "pretend-node-b");
  EXPECT_EQ(commfuse::comm::host_identity(), "pretend-node-b");
}

// ---- forming a group and collectives ----

TEST(Bootstrap, RejectsBadArguments) {
  EXPECT_THROW(Bootstrap::create("127.0.0.1", 29500, 2, 2, 5), commfuse::InvalidArgument);
  EXPECT_THROW(Bootstrap::create("127.0.0.1", 29500, 0, 0, 5), commfuse::InvalidArgument);
  EXPECT_THROW(Bootstrap::create("127.0.0.1", 0, 0, 2, 5), commfuse::InvalidArgument);
  EXPECT_THROW(Bootstrap::create("127.0.0.1", 29500, 0, 2, 0), commfuse::InvalidArgument);
  EXPECT_THROW(Bootstrap::create("", 29500, 0, 2, 5), commfuse::InvalidArgument);
}

TEST(Bootstrap, AllGatherReturnsEveryBlobInRankOrder) {
  for (int ws : {1, 2, 3, 8}) {
    SCOPED_TRACE("world_size " + std::to_string(ws));
    const int port = free_port();
    // Rank 0 empty, rank 1 1 MiB, others small and all different.
    auto size_of = [](int r) -> size_t { return r == 0 ? 0 : r == 1 ? (1u << 20) : 37u * r; };
    auto out = run_threads(ws, [&](int r) {
      auto b = Bootstrap::create("127.0.0.1", port, r, ws, 10);
      EXPECT_EQ(b->rank(), r);
      EXPECT_EQ(b->world_size(), ws);
      return b->all_gather(blob_for(r, size_of(r)));
    });
    for (int r = 0; r < ws; ++r) {
      const Outcome& o = out[static_cast<size_t>(r)];
      ASSERT_TRUE(o.ok) << "rank " << r << ": " << o.message;
      ASSERT_EQ(o.result.size(), static_cast<size_t>(ws));
      for (int s = 0; s < ws; ++s)
        EXPECT_TRUE(o.result[static_cast<size_t>(s)] == blob_for(s, size_of(s)))
            << "rank " << r << " got a wrong blob for rank " << s;
    }
  }
}

TEST(Bootstrap, IPv6AndHostNames) {
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  const bool have_v6 = fd >= 0 && free_port(AF_INET6) != 0;
  if (fd >= 0) close(fd);
  for (const char* host : {"localhost", "::1"}) {
    if (std::string(host) == "::1" && !have_v6) continue;
    SCOPED_TRACE(host);
    const int port = free_port(std::string(host) == "::1" ? AF_INET6 : AF_INET);
    auto out = run_threads(3, [&](int r) {
      return Bootstrap::create(host, port, r, 3, 10)->all_gather(std::to_string(r));
    });
    for (const auto& o : out) {
      ASSERT_TRUE(o.ok) << o.message;
      EXPECT_EQ(o.result, (std::vector<std::string>{"0", "1", "2"}));
    }
  }
}

TEST(Bootstrap, BarrierWaitsForEveryRank) {
  const int ws = 4, port = free_port();
  std::atomic<int> arrived{0};
  auto out = run_threads(ws, [&](int r) -> std::vector<std::string> {
    auto b = Bootstrap::create("127.0.0.1", port, r, ws, 10);
    std::this_thread::sleep_for(std::chrono::milliseconds(40 * (ws - r)));
    arrived.fetch_add(1);
    b->barrier();
    EXPECT_EQ(arrived.load(), ws) << "rank " << r << " left the barrier early";
    b->barrier();  // and again, with no one late
    return {};
  });
  for (const auto& o : out) EXPECT_TRUE(o.ok) << o.message;
}

TEST(Bootstrap, ManyConsecutiveAllGathersStayInStep) {
  const int ws = 4, port = free_port(), rounds = 200;
  auto out = run_threads(ws, [&](int r) -> std::vector<std::string> {
    auto b = Bootstrap::create("127.0.0.1", port, r, ws, 10);
    for (int i = 0; i < rounds; ++i) {
      // Sizes vary per round so frames of different lengths follow each other.
      auto got = b->all_gather(std::to_string(i) + ":" + blob_for(r, (i * 13 + r) % 50));
      EXPECT_EQ(got.size(), static_cast<size_t>(ws));
      for (int s = 0; s < ws && s < static_cast<int>(got.size()); ++s)
        if (got[static_cast<size_t>(s)] != std::to_string(i) + ":" + blob_for(s, (i * 13 + s) % 50))
          ADD_FAILURE() << "rank " << r << " round " << i << " blob of rank " << s;
    }
    return {};
  });
  for (const auto& o : out) EXPECT_TRUE(o.ok) << o.message;
}

TEST(Bootstrap, PortCanBeReusedRightAway) {
  const int port = free_port();
  for (int round = 0; round < 3; ++round) {
    auto out = run_threads(2, [&](int r) {
      return Bootstrap::create("127.0.0.1", port, r, 2, 10)->all_gather(std::to_string(round));
    });
    for (const auto& o : out) ASSERT_TRUE(o.ok) << "round " << round << ": " << o.message;
  }
}

TEST(Bootstrap, StrayConnectionIsIgnored) {
  const int port = free_port();
  std::atomic<bool> done{false};
  // A client that is not a commfuse rank (a port scanner, say) connects and sends junk.
  std::thread stray([&] {
    while (!done) {
      if (const int fd = connect_loopback(port); fd >= 0) {
        const char junk[] = "GET / HTTP/1.0\r\n\r\n";
        (void)!send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
        close(fd);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  auto out = run_threads(3, [&](int r) {
    // Rank 2 comes late so the stray is seen while the group forms.
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return Bootstrap::create("127.0.0.1", port, r, 3, 10)->all_gather("x");
  });
  done = true;
  stray.join();
  for (const auto& o : out) EXPECT_TRUE(o.ok) << o.message;
}

// ---- failures ----

TEST(Bootstrap, PortInUseFailsOnRankZeroNamingIt) {
  const int port = free_port();
  const int blocker = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(blocker, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(blocker, 1), 0);
  try {
    Bootstrap::create("127.0.0.1", port, 0, 2, 2);
    ADD_FAILURE() << "listened on a busy port";
  } catch (const commfuse::RuntimeFailure& e) {
    EXPECT_EQ(std::string(e.what()), "bootstrap(rank 0): cannot listen on 127.0.0.1:" +
                                         std::to_string(port) + ": Address already in use");
  }
  close(blocker);
}

TEST(Bootstrap, WorldSizeMismatchFailsEveryRankWithBothSizes) {
  const int port = free_port();
  // Rank 0 believes in 2 ranks, ranks 1 and 2 in 3.
  auto out = run_threads(3, [&](int r) {
    return Bootstrap::create("127.0.0.1", port, r, r == 0 ? 2 : 3, 5)->all_gather("x");
  });
  for (const auto& o : out) {
    EXPECT_FALSE(o.ok);
    EXPECT_EQ(o.code, Status::kParamInvalid) << o.message;
    EXPECT_TRUE(contains(o.message, "was started with world_size 3 but rank 0 has 2")) << o.message;
  }
  EXPECT_EQ(out[0].message, out[1].message);
  EXPECT_EQ(out[0].message, out[2].message);
}

// Two processes claim rank 1 (one a raw hello, so that both reach rank 0 before rank 2); rank
// 2 starts only once the verdict is out, and rank 0 still tells it (it had counted hellos,
// the duplicate's included, as "every rank heard", stopped listening, and rank 2 waited out
// its timeout: "could not reach rank 0").
TEST(Bootstrap, DuplicateRankFailsEveryRank) {
  const int port = free_port();
  std::atomic<bool> verdict_out{false};
  std::string raw_got;
  auto out = run_threads(4, [&](int i) -> std::vector<std::string> {
    if (i == 3) {  // the second rank 1: a hello, then rank 0's answer
      const int fd = raw_hello(port, 1, 3);
      EXPECT_GE(fd, 0) << "rank 0 never listened";
      commfuse::comm::wire::Frame f;
      int err = 0;
      if (fd >= 0 && commfuse::comm::wire::recv_frame(
                         fd, &f, commfuse::comm::net::Deadline::after(std::chrono::seconds(5)),
                         &err) == commfuse::comm::net::Io::kOk)
        raw_got = f.payload;
      verdict_out = true;
      if (fd >= 0) close(fd);
      return {};
    }
    if (i == 2)
      while (!verdict_out) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return Bootstrap::create("127.0.0.1", port, i, 3, 5)->all_gather("x");
  });
  EXPECT_NE(raw_got.find("two processes claim rank 1"), std::string::npos) << raw_got;
  for (int i = 0; i < 3; ++i) {
    const Outcome& o = out[static_cast<size_t>(i)];
    EXPECT_EQ(o.code, Status::kParamInvalid) << "rank " << i << ": " << o.message;
    EXPECT_EQ(o.message, "bootstrap: two processes claim rank 1") << "rank " << i;
  }
}

// A rank stopped (Ctrl-C) after its hello, while the group still forms, and started again:
// rank 0 sees its connection close and gives its place to the new process (the old
// connection had kept it: "two processes claim rank 1" on every rank, one rank 1 alive).
// Not started again, it is named as having left, once the others are all here and the
// rejoin grace (3 s) is over: not "did not connect" at the timeout (10 s here).
TEST(Bootstrap, ARankThatLeavesWhileTheGroupFormsMayJoinAgain) {
  for (const bool again : {true, false}) {
    const int port = free_port();
    auto out = run_threads(3, [&](int r) -> std::vector<std::string> {
      if (r == 1) {  // the first rank 1: its hello, then gone
        const int fd = raw_hello(port, 1, 3);
        EXPECT_GE(fd, 0) << "rank 0 never listened";
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 0 has joined it
        if (fd >= 0) close(fd);
        if (!again) return {};
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(700));
      return Bootstrap::create("127.0.0.1", port, r, 3, 10)->all_gather(std::to_string(r));
    });
    for (int r = 0; r < 3; ++r) {
      const Outcome& o = out[static_cast<size_t>(r)];
      if (again) {
        EXPECT_TRUE(o.ok) << "rank " << r << ": " << o.message;
        EXPECT_EQ(o.result, (std::vector<std::string>{"0", "1", "2"})) << "rank " << r;
      } else if (r != 1) {
        EXPECT_EQ(o.code, Status::kRuntimeError) << "rank " << r << ": " << o.message;
        EXPECT_EQ(o.message,
                  "bootstrap(rank 0): rank 1 connected, then closed its connection while the "
                  "group formed, and did not connect again within 3 s")
            << "rank " << r;
      }
    }
  }
}

TEST(Bootstrap, RankThatNeverArrivesIsNamedWithinTheTimeout) {
  const int port = free_port();
  const int present[] = {0, 1, 3};  // rank 2 of 4 never starts
  const auto t0 = Clock::now();
  auto out = run_threads(3, [&](int i) {
    return Bootstrap::create("127.0.0.1", port, present[i], 4, 2)->all_gather("x");
  });
  const double took = seconds_since(t0);
  for (const auto& o : out) {
    EXPECT_EQ(o.code, Status::kRuntimeError) << o.message;
    // Every rank reports rank 0's verdict, which names the absent rank.
    EXPECT_EQ(o.message, "bootstrap(rank 0): rank 2 did not connect within 2 s");
  }
  EXPECT_GE(took, 1.9);
  EXPECT_LT(took, 4.5);
}

// The missing ranks are listed in runs, at most 16 of them: a world of 10^8 that never formed
// listed every rank, a message of a gigabyte built for 13 s past the timeout.
TEST(Bootstrap, MissingRanksAreListedInRunsAndCapped) {
  const int port = free_port();
  auto alone = run_threads(
      1, [&](int) { return Bootstrap::create("127.0.0.1", port, 0, 40, 1)->all_gather("x"); });
  EXPECT_EQ(alone[0].message, "bootstrap(rank 0): ranks 1-39 did not connect within 1 s");
  // Every even rank of 40 present: 20 odd ones missing, each a run of its own.
  const int port2 = free_port();
  auto evens = run_threads(20, [&](int i) {
    return Bootstrap::create("127.0.0.1", port2, 2 * i, 40, 1)->all_gather("x");
  });
  EXPECT_EQ(evens[0].message,
            "bootstrap(rank 0): ranks 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, "
            "... (20 in all) did not connect within 1 s");
}

// Puts RLIMIT_NOFILE back whatever a test did to it, failed assertions included.
struct RestoreFileLimit {
  rlimit saved{};
  RestoreFileLimit() { getrlimit(RLIMIT_NOFILE, &saved); }
  ~RestoreFileLimit() { setrlimit(RLIMIT_NOFILE, &saved); }
};

// Rank 0 holds a connection to every rank while the group forms. Past the soft open-file
// limit it raises that limit (accept() had failed with EMFILE there); past the hard limit the
// world is refused, naming it, and the ranks connecting meanwhile are told (a worldSize of 2e9 grew
// rank 0 to 24 GB until the kernel killed it; 10^8 answered 13 s past its timeout).
TEST(Bootstrap, RankZeroRaisesTheOpenFileLimitOrRefusesAWorldPastIt) {
  const RestoreFileLimit restore;
  rlimit low = restore.saved;
  low.rlim_cur = std::min<rlim_t>(restore.saved.rlim_cur, 256);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  if (restore.saved.rlim_max == RLIM_INFINITY || restore.saved.rlim_max >= 1100) {
    // 999 connections do not fit 256 files: raised, then the group waits for its ranks.
    auto out = run_threads(1, [&](int) {
      return Bootstrap::create("127.0.0.1", free_port(), 0, 1000, 1)->all_gather("x");
    });
    EXPECT_EQ(out[0].message, "bootstrap(rank 0): ranks 1-999 did not connect within 1 s");
    rlimit now{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
    EXPECT_GE(now.rlim_cur, rlim_t{1000});
  }
  if (restore.saved.rlim_max != RLIM_INFINITY && restore.saved.rlim_max < (rlim_t{1} << 30)) {
    // Refused on rank 0 before anything is allocated for the group, and told to ranks 1 and 2,
    // which connect while rank 0 lingers (kErrorLinger, 1 s) instead of timing out reaching
    // it; a connection that says nothing and stays open meanwhile (here first, as thread 3)
    // must not keep them from being told (answered one at a time, it had: both got a reset).
    const int world = static_cast<int>(restore.saved.rlim_max) + 10, port = free_port();
    const auto t0 = Clock::now();
    auto out = run_threads(4, [&](int r) -> std::vector<std::string> {
      if (r == 3) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        for (int i = 0; i < 100 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0;
             ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // silent, then gone
        close(fd);
        return {};
      }
      if (r > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // after it
      return Bootstrap::create("127.0.0.1", port, r, world, 1)->all_gather("x");
    });
    const double took = seconds_since(t0);
    const std::string refusal = "bootstrap(rank 0): world_size is " + std::to_string(world) +
                                ", which needs " + std::to_string(world - 1) +
                                " connections at rank 0 while the group forms";
    for (int r = 0; r < 3; ++r) {
      const Outcome& o = out[static_cast<size_t>(r)];
      EXPECT_FALSE(o.ok) << "rank " << r << ": a group of " << world << " was formed";
      EXPECT_EQ(o.code, Status::kParamInvalid) << "rank " << r << ": " << o.message;
      EXPECT_TRUE(contains(o.message, refusal)) << "rank " << r << ": " << o.message;
      EXPECT_TRUE(contains(o.message, "hard limit " + std::to_string(restore.saved.rlim_max)))
          << "rank " << r << ": " << o.message;
    }
    EXPECT_LT(took, 3.0);  // the linger and the silent connection, not a peer's timeout
  }
  // Another rank holds one connection: never refused for it (it times out reaching rank 0).
  EXPECT_THROW(Bootstrap::create("127.0.0.1", free_port(), 5, 1 << 30, 1),
               commfuse::RuntimeFailure);
}

TEST(Bootstrap, UnreachableRankZeroTimesOut) {
  const int port = free_port();  // nobody listens there
  const auto t0 = Clock::now();
  try {
    Bootstrap::create("127.0.0.1", port, 3, 4, 1);
    ADD_FAILURE() << "joined a group without rank 0";
  } catch (const commfuse::RuntimeFailure& e) {
    EXPECT_TRUE(contains(e.what(), "bootstrap(rank 3): could not reach rank 0 at 127.0.0.1:" +
                                       std::to_string(port) + " within 1 s"))
        << e.what();
  }
  EXPECT_LT(seconds_since(t0), 2.5);
}

TEST(Bootstrap, MismatchedCollectivesFailAndLeaveTheGroupUnusable) {
  const int port = free_port();
  auto out = run_threads(2, [&](int r) -> std::vector<std::string> {
    auto b = Bootstrap::create("127.0.0.1", port, r, 2, 5);
    try {
      if (r == 0)
        b->barrier();
      else
        b->all_gather("x");
    } catch (const commfuse::InvalidArgument&) {
      EXPECT_THROW(b->all_gather("again"), commfuse::RuntimeFailure);
      throw;
    }
    return {};
  });
  for (const auto& o : out) {
    EXPECT_EQ(o.code, Status::kParamInvalid) << o.message;
    EXPECT_TRUE(contains(o.message, "rank 1 called all_gather but rank 0 called barrier"))
        << o.message;
  }
}

TEST(Bootstrap, StalledRankIsNamedWhenACollectiveTimesOut) {
  const int port = free_port();
  const auto t0 = Clock::now();
  auto out = run_threads(3, [&](int r) {
    auto b = Bootstrap::create("127.0.0.1", port, r, 3, 1);
    // Rank 2 is alive but late: past the 1 s deadline of the others.
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    return b->all_gather("x");
  });
  for (const auto& o : out) {
    EXPECT_EQ(o.code, Status::kRuntimeError) << o.message;
    // The late rank too gets rank 0's verdict, which was waiting on its connection.
    EXPECT_EQ(o.message, "bootstrap(rank 0): rank 2 did not arrive at all_gather #1 within 1 s");
  }
  EXPECT_LT(seconds_since(t0), 4.0);
}

// A forked child is a real peer process; it completes one all_gather, then dies without
// closing anything gracefully, while the others are already in the next all_gather.
TEST(Bootstrap, PeerProcessThatDiesIsNamedOnEveryRank) {
  const int port = free_port();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 1;
    try {
      auto b = Bootstrap::create("127.0.0.1", port, 2, 3, 5);
      auto got = b->all_gather("child");
      code = got == std::vector<std::string>{"r0", "r1", "child"} ? 42 : 2;
    } catch (...) {
      code = 3;
    }
    _exit(code);
  }
  const auto t0 = Clock::now();
  auto out = run_threads(2, [&](int r) {
    auto b = Bootstrap::create("127.0.0.1", port, r, 3, 5);
    auto got = b->all_gather("r" + std::to_string(r));
    EXPECT_EQ(got, (std::vector<std::string>{"r0", "r1", "child"}));
    return b->all_gather("second");  // rank 2 is gone by now
  });
  EXPECT_EQ(reap(child, std::chrono::seconds(10)), 42) << "the child's all_gather failed";
  for (const auto& o : out) {
    EXPECT_EQ(o.code, Status::kRuntimeError) << o.message;
    EXPECT_TRUE(contains(o.message, "bootstrap(rank 0): lost connection to rank 2")) << o.message;
  }
  EXPECT_LT(seconds_since(t0), 4.0) << "a dead peer should be noticed, not waited out";
}

TEST(Bootstrap, RankZeroProcessThatDiesIsNamedOnEveryRank) {
  const int port = free_port();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 1;
    try {
      auto b = Bootstrap::create("127.0.0.1", port, 0, 3, 5);
      code = b->all_gather("r0").size() == 3 ? 42 : 2;
    } catch (...) {
      code = 3;
    }
    _exit(code);
  }
  const auto t0 = Clock::now();
  auto out = run_threads(2, [&](int i) {
    auto b = Bootstrap::create("127.0.0.1", port, i + 1, 3, 5);
    b->all_gather("x");
    return b->all_gather("second");
  });
  EXPECT_EQ(reap(child, std::chrono::seconds(10)), 42) << "the child's all_gather failed";
  for (int i = 0; i < 2; ++i) {
    const Outcome& o = out[static_cast<size_t>(i)];
    EXPECT_EQ(o.code, Status::kRuntimeError) << o.message;
    EXPECT_TRUE(contains(
        o.message, "bootstrap(rank " + std::to_string(i + 1) + "): lost connection to rank 0"))
        << o.message;
  }
  EXPECT_LT(seconds_since(t0), 4.0);
}

// ---- frames ----

namespace {

// A frame header as the wire carries it (little-endian magic, type, seq, length).
std::string frame_header(commfuse::comm::wire::FrameType type, uint32_t seq, uint64_t length) {
  std::string h;
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) h.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(commfuse::comm::wire::kMagic, 4);
  put(static_cast<uint32_t>(type), 4);
  put(seq, 4);
  put(length, 8);
  return h;
}

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace

TEST(BootstrapFrames, APayloadArrivingInPiecesIsReadWhole) {
  using namespace commfuse::comm;
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ASSERT_EQ(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
  const std::string payload = blob_for(3, 200000);  // past the reader's first 64 KiB
  const std::string bytes = frame_header(wire::FrameType::kAllGather, 7, payload.size()) + payload;
  wire::FrameReader reader;
  int err = 0;
  for (size_t at = 0; at < bytes.size(); at += 4099) {
    const size_t n = std::min<size_t>(4099, bytes.size() - at);
    ASSERT_EQ(send(fds[1], bytes.data() + at, n, 0), static_cast<ssize_t>(n));
    const net::Io io = reader.feed(fds[0], &err);
    ASSERT_EQ(io, at + n == bytes.size() ? net::Io::kOk : net::Io::kWouldBlock) << at;
  }
  ASSERT_TRUE(reader.done());
  const wire::Frame f = reader.take();
  EXPECT_EQ(f.type, wire::FrameType::kAllGather);
  EXPECT_EQ(f.seq, 7u);
  EXPECT_TRUE(f.payload == payload);
  close(fds[0]);
  close(fds[1]);
}

// A peer's header claims a 1 GiB payload and sends 100 bytes: rank 0 holds about what
// arrived, not a zero-filled gigabyte (it did: resized to the length before reading).
TEST(BootstrapFrames, AHugeLengthCostsOnlyTheBytesSent) {
  using namespace commfuse::comm;
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ASSERT_EQ(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
  const std::string bytes =
      frame_header(wire::FrameType::kAllGather, 1, uint64_t{1} << 30) + std::string(100, 'x');
  ASSERT_EQ(send(fds[1], bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  const long before = max_rss_kib();
  wire::FrameReader reader;
  int err = 0;
  EXPECT_EQ(reader.feed(fds[0], &err), net::Io::kWouldBlock);
  EXPECT_FALSE(reader.done());
  EXPECT_LT(max_rss_kib() - before, 64 << 10) << "KiB of peak memory grown reading 100 bytes";
  close(fds[1]);
  EXPECT_EQ(reader.feed(fds[0], &err), net::Io::kClosed);
  close(fds[0]);
}
