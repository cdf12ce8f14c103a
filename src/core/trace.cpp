#include "core/trace.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"

namespace commfuse::trace {

std::string path_problem(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "is a directory";
    // A FIFO would hold every rank's tracer at exit until something reads it.
    if (S_ISFIFO(st.st_mode)) return "is a FIFO, not a file (its writers would wait for a reader)";
    if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) return "is not a file or a device";
    // Kernel files take no trace (a write fails: /proc/version gave EIO).
    struct statfs fs {};
    if (statfs(path.c_str(), &fs) == 0 &&
        (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC))
      return "is a kernel file (/proc, /sys)";
    // access() answers yes to root on any file of a writable mount: an existing file's
    // permission is all it can check without opening it.
    if (access(path.c_str(), W_OK) != 0) return std::strerror(errno);
    return {};
  }
  if (errno != ENOENT) return std::strerror(errno);
  struct stat link {};
  if (lstat(path.c_str(), &link) == 0) {
    if (S_ISLNK(link.st_mode)) return "is a symbolic link to a missing file";
    return path_problem(path);  // made by another process meanwhile: check what is there
  }
  // A new file: whether its directory takes one is tried with a file of this process's own
  // there, made and removed again, since access() cannot tell root that a directory (/proc,
  // /sys) takes no new files; never the path itself, which another process's tracer may be
  // opening meanwhile.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string probe =
      ::commfuse::detail::cat(dir, slash == std::string::npos ? "/" : "", ".commfuse-probe-",
                              getpid(), "-", syscall(SYS_gettid));
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  close(fd);
  unlink(probe.c_str());
  return {};
}
namespace {

struct Event {
  const char* name;
  const char* cat;
  int64_t peer;
  uint64_t bytes;
  uint64_t start_ns, end_ns;
  long tid;
};

class Recorder {
 public:
  Recorder() : path_(params::get_string("COMMFUSE_TRACE")) {}
  ~Recorder() { flush(); }

  bool on() const { return !path_.empty(); }

  void add(const Event& e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (path_.empty()) return;  // stopped
    events_.push_back(e);
    if (events_.size() >= 65536) write_locked();
  }
  void set_rank(int r) {
    std::lock_guard<std::mutex> lock(mu_);
    rank_ = r;
  }
  void flush() {
    std::lock_guard<std::mutex> lock(mu_);
    write_locked();
  }

 private:
  // Tracing stops for good: nothing is recorded or kept from here on (events had piled up
  // in memory after a failed write, 163 MB at 900,000 calls).
  void stop_locked() {
    path_.clear();
    events_.clear();
    events_.shrink_to_fit();
    detail::g_file_state.store(0, std::memory_order_relaxed);
  }

  void write_locked() {
    if (path_.empty() || (events_.empty() && named_)) return;
    std::string out;
    char buf[512];
    const int pid = rank_ >= 0 ? rank_ : static_cast<int>(getpid());
    if (!named_) {
      std::snprintf(buf, sizeof buf,
                    "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank "
                    "%d\"}},\n",
                    pid, pid);
      out += buf;
      named_ = true;
    }
    for (const Event& e : events_) {
      std::snprintf(buf, sizeof buf,
                    "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%ld,"
                    "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"peer\":%lld,\"bytes\":%llu}},\n",
                    e.name, e.cat, pid, e.tid, static_cast<double>(e.start_ns) / 1e3,
                    static_cast<double>(e.end_ns - e.start_ns) / 1e3,
                    static_cast<long long>(e.peer), static_cast<unsigned long long>(e.bytes));
      out += buf;
    }
    events_.clear();
    const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      CF_LOG(kWarn, "COMMFUSE_TRACE: cannot open ", path_, "; tracing stops");
      stop_locked();
      return;
    }
    // Ranks are separate processes appending to one file: the lock keeps each batch whole
    // and lets exactly one of them (whoever finds the file empty) write the opening '['.
    ::flock(fd, LOCK_EX);
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size == 0) out.insert(0, "[\n");
    size_t done = 0;
    int err = 0;
    while (done < out.size()) {
      const ssize_t w = ::write(fd, out.data() + done, out.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        err = w < 0 ? errno : EIO;
        break;
      }
      done += static_cast<size_t>(w);
    }
    ::flock(fd, LOCK_UN);
    ::close(fd);
    if (err != 0) {  // a full disk, or a file that takes no writes (/dev/full): said, not lost
      CF_LOG(kWarn, "COMMFUSE_TRACE: writing ", path_, " failed (", std::strerror(err),
             "); tracing stops");
      stop_locked();
    }
  }

  std::mutex mu_;
  std::string path_;
  std::vector<Event> events_;
  int rank_ = -1;
  bool named_ = false;
};

Recorder& recorder() {
  static Recorder r;  // destroyed at exit, which writes what is left
  return r;
}

}  // namespace

namespace {
thread_local bool t_paused = false;

bool file_on() {
  static const bool on = [] {
    const bool v = recorder().on();
    detail::g_file_state.store(v ? 1 : 0, std::memory_order_relaxed);
    return v;
  }();
  return on;
}
}  // namespace

bool detail::enabled_slow() {
  return file_on() && !t_paused;
}

Pause::Pause() : outer_(t_paused) {
  t_paused = true;
}

Pause::~Pause() {
  t_paused = outer_;
}

void set_rank(int rank) {
  if (file_on()) recorder().set_rank(rank);
}

void flush() {
  if (file_on()) recorder().flush();
}

uint64_t Span::now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // one clock for every process on the host
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void Span::record(const char* name, const char* cat, int64_t peer, uint64_t bytes,
                  uint64_t start_ns, uint64_t end_ns) {
  thread_local const long tid = static_cast<long>(::syscall(SYS_gettid));
  try {  // runs in a destructor: a failure drops the event rather than terminating
    recorder().add(Event{name, cat, peer, bytes, start_ns, end_ns, tid});
  } catch (...) {
  }
}

}  // namespace commfuse::trace
