// The local launcher: fork/exec one process per rank, forward their output line by line with a
// "[rank r] " prefix, reap them as soon as they exit (the runtime's dead-peer detection looks
// for exited processes, so no zombie may linger while other ranks wait on it), and stop them
// all when one fails. Single-threaded: one poll() loop over the ranks' pipes and a self-pipe
// that the signal handlers write to.
#include "launcher.hpp"

#include <commfuse/commfuse.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "comm/shm/segment.hpp"
#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "line_forwarder.hpp"

extern char** environ;

namespace commfuse::cli {
namespace {

using Clock = std::chrono::steady_clock;
using detail::cat;

constexpr const char* kMasterAddr = "127.0.0.1";
constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGCHLD};

std::string errno_text(int e) {
  return std::strerror(e);
}

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return cat("signal ", sig, " (", abbrev ? cat("SIG", abbrev) : std::string("unknown"), ")");
}

std::string plural(size_t n, const char* word) {
  return cat(n, " ", word, n == 1 ? "" : "s");
}

// ---- signals: handlers only write the signal number to a self-pipe; the loop does the work.

int g_wake_write_fd = -1;

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t n = ::write(g_wake_write_fd, &byte, 1);
  errno = saved;
}

// Installs the handlers for the duration of launch() and restores the caller's on return.
// Children get the caller's dispositions back before exec (restore_in_child), so a program
// launched from a shell that ignores SIGINT still ignores it, and SIGPIPE is not left ignored.
class SignalScope {
 public:
  SignalScope() {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0)
      throw RuntimeFailure(cat("commfuse launch: pipe: ", errno_text(errno)));
    g_wake_write_fd = wake_[1];
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    // No SA_RESTART: poll() returns EINTR either way and the self-pipe makes it wake.
    sa.sa_flags = SA_NOCLDSTOP;
    for (size_t i = 0; i < std::size(kHandledSignals); ++i)
      ::sigaction(kHandledSignals[i], &sa, &old_[i]);
    // A closed stdout must not kill the launcher (and, through PDEATHSIG, every rank).
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old_pipe_);
  }
  ~SignalScope() {
    restore_in_child();
    g_wake_write_fd = -1;
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  int wake_fd() const { return wake_[0]; }

  // Async-signal-safe: called between fork and exec.
  void restore_in_child() const {
    for (size_t i = 0; i < std::size(kHandledSignals); ++i)
      ::sigaction(kHandledSignals[i], &old_[i], nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  }

  // Signal numbers received since the last call.
  std::vector<int> drain() const {
    std::vector<int> sigs;
    unsigned char buf[64];
    ssize_t n;
    while ((n = ::read(wake_[0], buf, sizeof buf)) > 0) sigs.insert(sigs.end(), buf, buf + n);
    return sigs;
  }

 private:
  int wake_[2] = {-1, -1};
  struct sigaction old_[std::size(kHandledSignals)]{};
  struct sigaction old_pipe_ {};
};

// The launcher's child processes now (it is single-threaded: its one task's list); empty
// where the kernel does not list them.
std::vector<pid_t> own_children() {
  std::ifstream in(cat("/proc/self/task/", ::getpid(), "/children"));
  std::vector<pid_t> pids;
  for (pid_t pid; in >> pid;) pids.push_back(pid);
  return pids;
}

// Blocks the handled signals around fork() so that none runs our handler in the child before
// it has restored the caller's dispositions; they stay pending and are delivered afterwards.
class BlockSignals {
 public:
  BlockSignals() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : kHandledSignals) sigaddset(&set, sig);
    ::sigprocmask(SIG_BLOCK, &set, &old_);
  }
  ~BlockSignals() { unblock(); }
  void unblock() const { ::sigprocmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

// ---- ranks

struct Rank {
  pid_t pid = -1;
  bool started = false;
  bool running = false;
  int status = 0;      // waitpid status once reaped
  int exec_errno = 0;  // non-zero: execvp failed in the child with this errno
  LineForwarder out, err;
};

// The environment of one rank: the launcher's, minus any variable we set, plus ours.
std::vector<std::string> rank_environment(const LaunchOptions& o, int rank, int port,
                                          const std::string& launch_id) {
  std::vector<std::pair<std::string, std::string>> ours = {
      {"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(o.nprocs)},
      {"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", std::to_string(o.nprocs)},
      {"MASTER_ADDR", kMasterAddr},         {"MASTER_PORT", std::to_string(port)},
      {"COMMFUSE_LAUNCH_ID", launch_id},
  };
  ours.insert(ours.end(), o.extra_env.begin(), o.extra_env.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry = *e;
    const std::string_view key = entry.substr(0, entry.find('='));
    const bool overridden =
        std::any_of(ours.begin(), ours.end(), [&](const auto& kv) { return kv.first == key; });
    if (!overridden) env.emplace_back(entry);
  }
  for (const auto& [k, v] : ours) env.push_back(k + "=" + v);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In the child: put `from` at `to`, leaving it open across exec.
void move_fd(int from, int to) {
  if (from == to)
    ::fcntl(to, F_SETFD, 0);
  else
    ::dup2(from, to);
}

// What a finished rank did, for messages and the summary.
std::string outcome(const Rank& r, const std::string& program) {
  if (!r.started) return "not started";
  if (r.exec_errno != 0) return cat("cannot execute '", program, "': ", errno_text(r.exec_errno));
  if (WIFEXITED(r.status)) return cat("exited with code ", WEXITSTATUS(r.status));
  if (WIFSIGNALED(r.status))
    return cat("killed by ", signal_text(WTERMSIG(r.status)),
               WCOREDUMP(r.status) ? " (core dumped)" : "");
  return cat("ended with wait status ", r.status);
}

int exit_code_of(const Rank& r) {
  if (r.exec_errno != 0) return 127;
  if (WIFEXITED(r.status)) return WEXITSTATUS(r.status);
  if (WIFSIGNALED(r.status)) return 128 + WTERMSIG(r.status);
  return 1;
}

class Launcher {
 public:
  Launcher(const LaunchOptions& o, const std::vector<std::string>& argv)
      : opts_(o), argv_(argv), ranks_(static_cast<size_t>(o.nprocs)) {
    grace_ = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(std::clamp(o.grace_s, 0.0, 1e7)));
  }

  int run() {
    // Orphaned descendants of the ranks become the launcher's children, which kill_orphans
    // ends when the launch is stopped (Linux only; elsewhere they outlive it, as before).
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    const int port = opts_.port != 0 ? opts_.port : pick_free_port();
    for (int r = 0; r < opts_.nprocs && !stopping(); ++r) spawn(r, port);
    while (count_running() > 0) {
      reap();
      if (count_running() == 0) break;
      if (term_at_ && Clock::now() >= *term_at_) grace_over();
      if (kill_at_ && Clock::now() >= *kill_at_) escalate();
      wait_for_events();
    }
    // A launch that was stopped (a failure, a signal) ends what its ranks started too.
    if (first_failure_ || interrupted_by_ || start_error_) kill_orphans();
    // Every rank has exited. Whatever it wrote is already in its pipe; a descendant that
    // still holds the pipe open must not keep the launcher alive, so take what is there.
    for (auto& r : ranks_) {
      r.out.drain_and_close();
      r.err.drain_and_close();
    }
    const int code = exit_code();
    if (code != 0) say(summary(code));
    return code;
  }

 private:
  bool stopping() const { return term_at_.has_value() || kill_at_.has_value() || killed_; }

  size_t count_running() const {
    return static_cast<size_t>(
        std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }));
  }

  // What the ranks started and left behind (`sh -c 'worker & wait'` stopped by a signal, a
  // dataloader): the launcher is their subreaper (run), so they are its children now. Each is
  // killed and reaped, and so are theirs, which become the launcher's as their parent dies.
  // The ranks' process groups are left alone: a rank that reads the terminal (a debugger)
  // must stay in the foreground group.
  void kill_orphans() {
    for (int round = 0; round < 64; ++round) {
      const std::vector<pid_t> orphans = own_children();
      if (orphans.empty()) return;
      for (const pid_t pid : orphans) ::kill(pid, SIGKILL);
      for (const pid_t pid : orphans) {
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
      }
    }
  }

  void signal_running(int sig) {
    for (auto& r : ranks_)
      if (r.running) ::kill(r.pid, sig);
  }

  void spawn(int rank, int port) {
    Rank& r = ranks_[static_cast<size_t>(rank)];
    std::vector<std::string> env = rank_environment(opts_, rank, port, launch_id_);
    std::vector<std::string> args = argv_;
    std::vector<char*> envp = c_strings(env);
    std::vector<char*> argp = c_strings(args);

    int out[2] = {-1, -1}, err[2] = {-1, -1}, exec_status[2] = {-1, -1};
    const bool pipes_ok =
        ::pipe2(exec_status, O_CLOEXEC) == 0 &&
        (!opts_.prefix || (::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0));
    const int pipe_errno = errno;
    const pid_t parent = ::getpid();
    BlockSignals blocked;
    const pid_t pid = pipes_ok ? ::fork() : -1;
    if (pid == 0) {
      // The child: only async-signal-safe calls from here to exec.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
      signals_.restore_in_child();
      blocked.unblock();
      if (opts_.prefix) {
        move_fd(out[1], STDOUT_FILENO);
        move_fd(err[1], STDERR_FILENO);
      }
      ::execvpe(argp[0], argp.data(), envp.data());
      const int e = errno;
      [[maybe_unused]] const ssize_t n = ::write(exec_status[1], &e, sizeof e);
      ::_exit(127);
    }
    const int fork_errno = errno;
    blocked.unblock();
    for (int fd : {out[1], err[1], exec_status[1]})
      if (fd >= 0) ::close(fd);
    if (pid < 0) {
      for (int fd : {out[0], err[0], exec_status[0]})
        if (fd >= 0) ::close(fd);
      start_failure(cat("cannot start rank ", rank, ": ", pipes_ok ? "fork" : "pipe", ": ",
                        errno_text(pipes_ok ? fork_errno : pipe_errno)));
      return;
    }
    r.pid = pid;
    r.started = r.running = true;
    if (opts_.prefix) {
      r.out.open(out[0], STDOUT_FILENO, cat("[rank ", rank, "] "));
      r.err.open(err[0], STDERR_FILENO, cat("[rank ", rank, "] "));
    }
    // EOF (the close-on-exec end closed by a successful exec) or the child's errno.
    int e = 0;
    ssize_t n;
    while ((n = ::read(exec_status[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    ::close(exec_status[0]);
    if (n == static_cast<ssize_t>(sizeof e)) {
      r.exec_errno = e;
      fail(rank);
    }
  }

  // A rank could not be started at all: no exit status to report, the launcher exits 1.
  void start_failure(const std::string& message) {
    if (!first_failure_ && !interrupted_by_) {
      start_error_ = message;
      const size_t others = count_running();
      say(others > 0 ? cat(message, "; stopping the other ", plural(others, "rank")) : message);
      begin_stop(SIGTERM);
    }
  }

  // Rank `rank` failed; if it is the first failure, say so and stop the others.
  void fail(int rank) {
    if (first_failure_ || interrupted_by_ || start_error_) return;
    first_failure_ = rank;
    const Rank& r = ranks_[static_cast<size_t>(rank)];
    // "rank 0: cannot execute 'x': ..." / "rank 1 (pid 42) was killed by signal 9 (SIGKILL)"
    std::string what = r.exec_errno != 0
                           ? cat("rank ", rank, ": ", outcome(r, argv_[0]))
                           : cat("rank ", rank, " (pid ", r.pid, ") ",
                                 WIFSIGNALED(r.status) ? "was " : "", outcome(r, argv_[0]));
    size_t others = count_running() - (r.running ? 1 : 0);
    if (others > 0 && grace_ > Clock::duration::zero() && r.running == false) {
      // The others usually notice the failure themselves within a fraction of a second and
      // exit with their own error message: give them the grace period to do so, then stop
      // whoever is left.
      what += cat("; waiting up to ", std::chrono::duration<double>(grace_).count(),
                  " s for the other ", plural(others, "rank"), " to exit, then stopping them");
      say(what);
      term_at_ = Clock::now() + grace_;
      return;
    }
    if (others > 0) what += cat("; stopping the other ", plural(others, "rank"));
    say(what);
    begin_stop(SIGTERM);
  }

  // The grace period after a rank failure is over: ask the rest to stop, then kill them.
  void grace_over() {
    term_at_.reset();
    std::vector<int> left;
    for (size_t i = 0; i < ranks_.size(); ++i)
      if (ranks_[i].running) left.push_back(static_cast<int>(i));
    if (left.empty()) return;
    say(cat(left.size() == 1 ? "rank " : "ranks ", cpu::format_id_list(left),
            " still running after the ", std::chrono::duration<double>(grace_).count(),
            " s grace period; sending SIGTERM"));
    kill_at_ = Clock::now() + grace_;  // --help: the grace again before SIGKILL
    signal_running(SIGTERM);
  }

  // Asks the running ranks to stop with `sig`; SIGKILL follows after the grace period.
  void begin_stop(int sig) {
    if (grace_ == Clock::duration::zero()) {
      kill_at_.reset();
      killed_ = true;
      sig = SIGKILL;
    } else if (!kill_at_ && !killed_) {
      kill_at_ = Clock::now() + grace_;
    }
    signal_running(sig);
  }

  // The grace period is over: SIGKILL whoever is left.
  void escalate() {
    kill_at_.reset();
    killed_ = true;
    std::vector<int> left;
    for (size_t i = 0; i < ranks_.size(); ++i)
      if (ranks_[i].running) left.push_back(static_cast<int>(i));
    if (left.empty()) return;
    say(cat(left.size() == 1 ? "rank " : "ranks ", cpu::format_id_list(left),
            " still running after the ", std::chrono::duration<double>(grace_).count(),
            " s grace period; sending SIGKILL"));
    signal_running(SIGKILL);
  }

  void on_interrupt(int sig) {
    const size_t n = count_running();
    if (!interrupted_by_) {
      interrupted_by_ = sig;
      say(cat("received ", signal_text(sig), "; forwarding it to the ", plural(n, "running rank")));
      begin_stop(sig);
    } else {
      say(cat("received ", signal_text(sig), " again; sending SIGKILL to the ",
              plural(n, "running rank")));
      kill_at_.reset();
      killed_ = true;
      signal_running(SIGKILL);
    }
  }

  void reap() {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      Rank& r = ranks_[i];
      if (!r.running) continue;
      int status = 0;
      pid_t got;
      while ((got = ::waitpid(r.pid, &status, WNOHANG)) < 0 && errno == EINTR) {
      }
      if (got != r.pid) continue;
      r.running = false;
      r.status = status;
      // A rank killed between creating its shared memory and telling its peers the name
      // leaves it where no peer can find it; its pid names it (comm/shm/segment.hpp).
      if (const int n = comm::shm::Segment::unlink_names_of(r.pid, launch_id_); n > 0)
        std::fprintf(stderr, "commfuse launch: removed %d shared-memory segment%s rank %zu left\n",
                     n, n == 1 ? "" : "s", i);
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) fail(static_cast<int>(i));
    }
    // Orphans the launcher adopted as their subreaper (run), reaped as they exit so that none
    // stays a zombie for the whole launch. A rank that exited just now is the loop above's,
    // at the next event (its SIGCHLD is pending).
    for (;;) {
      siginfo_t info{};
      if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) break;
      const pid_t pid = info.si_pid;
      if (std::any_of(ranks_.begin(), ranks_.end(),
                      [pid](const Rank& r) { return r.running && r.pid == pid; }))
        break;
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }

  // Sleeps until output arrives, a signal comes in (SIGCHLD included) or the grace period ends.
  void wait_for_events() {
    std::vector<pollfd> fds = {{signals_.wake_fd(), POLLIN, 0}};
    std::vector<LineForwarder*> streams = {nullptr};
    for (auto& r : ranks_)
      for (LineForwarder* s : {&r.out, &r.err})
        if (s->is_open()) {
          fds.push_back({s->fd(), POLLIN, 0});
          streams.push_back(s);
        }
    int timeout_ms = -1;
    for (const auto& at : {term_at_, kill_at_}) {
      if (!at) continue;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*at - Clock::now());
      const int ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX));
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;  // timeout or EINTR
    if (fds[0].revents != 0)
      for (int sig : signals_.drain())
        if (sig == SIGINT || sig == SIGTERM) on_interrupt(sig);
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents != 0) streams[i]->read_some();
  }

  int exit_code() const {
    if (first_failure_) return exit_code_of(ranks_[static_cast<size_t>(*first_failure_)]);
    if (start_error_) return 1;
    if (interrupted_by_) return 128 + *interrupted_by_;
    return 0;
  }

  // One line: the first failure (or the start error, or the signal), then every other rank
  // grouped by outcome.
  std::string summary(int code) const {
    std::string s = "summary: ";
    if (first_failure_)
      s += cat("rank ", *first_failure_, ": ",
               outcome(ranks_[static_cast<size_t>(*first_failure_)], argv_[0]),
               " (first failure); ");
    if (start_error_) s += cat(*start_error_, "; ");
    if (interrupted_by_) s += cat("interrupted by ", signal_text(*interrupted_by_), "; ");
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      if (first_failure_ && static_cast<int>(i) == *first_failure_) continue;
      const std::string what = outcome(ranks_[i], argv_[0]);
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == what; });
      if (it == groups.end()) it = groups.insert(groups.end(), {what, {}});
      it->second.push_back(static_cast<int>(i));
    }
    for (const auto& [what, ranks] : groups)
      s +=
          cat(ranks.size() == 1 ? "rank " : "ranks ", cpu::format_id_list(ranks), ": ", what, "; ");
    return s + cat("exit code ", code);
  }

  const LaunchOptions& opts_;
  const std::vector<std::string>& argv_;
  // This launch's mark in its ranks' segment names (comm/shm/segment.hpp): pids repeat
  // across containers that share /dev/shm, the mark does not.
  const std::string launch_id_ = [] {
    std::random_device rd;
    char id[24];
    std::snprintf(id, sizeof id, "%08x%08x", rd(), rd());
    return std::string(id);
  }();
  std::vector<Rank> ranks_;
  SignalScope signals_;
  Clock::duration grace_{};
  // After a rank failure: when to SIGTERM the ranks still running (end of the grace period).
  std::optional<Clock::time_point> term_at_;
  std::optional<Clock::time_point> kill_at_;  // when SIGTERM'd ranks get SIGKILL
  bool killed_ = false;                       // SIGKILL already sent
  std::optional<int> first_failure_;
  std::optional<std::string> start_error_;
  std::optional<int> interrupted_by_;
};

}  // namespace

int launch(const LaunchOptions& options, const std::vector<std::string>& argv) {
  if (options.nprocs < 1)
    throw InvalidArgument(cat("launch: nprocs must be at least 1, got ", options.nprocs));
  if (argv.empty()) throw InvalidArgument("launch: no program given");
  if (options.port < 0 || options.port > 65535)
    throw InvalidArgument(cat("launch: port must be in 0..65535, got ", options.port));
  Launcher launcher(options, argv);
  return launcher.run();
}

namespace {

bool can_listen_on(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

int ephemeral_low() {  // first port the kernel hands out for bind(0) and connect
  int lo = 32768, hi = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768;
    std::fclose(f);
  }
  return lo;
}

}  // namespace

// MASTER_PORT: below the kernel's ephemeral range, so that no outgoing connection of another
// process (Open MPI opens many) can hold it, with the next kSparePorts free too, because the
// programs under launch (the tests) open further communicators on MASTER_PORT + 1, + 2. A
// port from bind(0) is ephemeral: a concurrent test's client socket once took its + 1.
int pick_free_port() {
  constexpr int kSparePorts = 3;
  const int hi = ephemeral_low() - kSparePorts - 1, lo = std::max(10000, hi - 16384);
  if (hi > lo) {
    std::mt19937 rng(
        static_cast<uint32_t>(::getpid()) ^
        static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
    std::uniform_int_distribution<int> pick(lo, hi);
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int port = pick(rng);
      bool free = true;
      for (int k = 0; k <= kSparePorts && free; ++k) free = can_listen_on(port + k);
      if (free) return port;
    }
  }
  // No room below the ephemeral range: any free port from the kernel.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw RuntimeFailure(cat("launch: socket: ", errno_text(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int e = errno;
  ::close(fd);
  if (!ok)
    throw RuntimeFailure(
        cat("launch: cannot find a free port on ", kMasterAddr, ": ", errno_text(e)));
  return ntohs(addr.sin_port);
}

std::string self_exe_path() {
  std::string path(256, '\0');
  for (;;) {
    const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
    if (n < 0) throw RuntimeFailure(cat("readlink /proc/self/exe: ", errno_text(errno)));
    if (static_cast<size_t>(n) < path.size()) {
      path.resize(static_cast<size_t>(n));
      return path;
    }
    path.resize(path.size() * 2);  // possibly truncated: retry with more room
  }
}

}  // namespace commfuse::cli
