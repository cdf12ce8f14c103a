#include "comm/shm/segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/params.hpp"

namespace commfuse::comm::shm {
namespace {

// "/commfuse-<pid>-<launch id>-": the launch id's [0-9a-z] only (it becomes part of a file
// name), "0" when none.
std::string names_prefix(pid_t pid, std::string_view launch_id) {
  std::string id;
  for (const char ch : launch_id)
    if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z')) id += ch;
  return detail::cat("/commfuse-", pid, "-", id.empty() ? std::string("0") : id, "-");
}

std::string random_name() {
  std::random_device rd;  // kernel entropy: names are not guessable by other users
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%08x%08x%08x", rd(), rd(), rd());
  return names_prefix(getpid(), params::get_string("COMMFUSE_LAUNCH_ID")) + buf;
}

[[noreturn]] void fail(const std::string& what, const std::string& name, size_t bytes, int err) {
  detail::throw_status(
      Status::kRuntimeError,
      detail::cat("shm: ", what, " ", name, " (", bytes, " bytes) failed: ", std::strerror(err),
                  err == ENOSPC || err == ENOMEM ? " (is /dev/shm full?)" : ""));
}

void* map(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail("mmap", name, bytes, errno);
  return p;
}

}  // namespace

Segment Segment::create(size_t bytes) {
  Segment s;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    s.name_ = random_name();
    fd = shm_open(s.name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno != EEXIST) fail("shm_open(create)", s.name_, bytes, errno);
  }
  if (fd < 0) fail("shm_open(create)", s.name_, bytes, EEXIST);
  s.owner_linked_ = true;
  s.bytes_ = bytes;
  // posix_fallocate reserves the pages now, so a full /dev/shm is an error here rather
  // than a SIGBUS in the middle of a collective.
  const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    close(fd);
    shm_unlink(s.name_.c_str());
    s.owner_linked_ = false;
    fail("posix_fallocate", s.name_, bytes, err);
  }
  try {
    s.data_ = map(fd, bytes, s.name_);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  return s;
}

Segment Segment::open(const std::string& name, size_t bytes) {
  Segment s;
  s.name_ = name;
  s.bytes_ = bytes;
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) fail("shm_open", name, bytes, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    close(fd);
    detail::throw_status(
        Status::kRuntimeError,
        detail::cat("shm: segment ", name, " is ", st.st_size, " bytes, expected ", bytes));
  }
  // Peers are processes of the same user (docs/reliability.md, threat model): a segment of
  // that name owned by anyone else, or readable by others, is not our peer's.
  if (st.st_uid != geteuid() || (st.st_mode & 0077) != 0) {
    close(fd);
    detail::throw_status(
        Status::kRuntimeError,
        detail::cat("shm: segment ", name, " is owned by uid ", st.st_uid, " with mode ", std::oct,
                    (st.st_mode & 0777), std::dec, ", not by this user (uid ", geteuid(),
                    ") with mode 600: refusing to attach"));
  }
  try {
    s.data_ = map(fd, bytes, name);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  return s;
}

Segment::Segment(Segment&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      name_(std::move(o.name_)),
      owner_linked_(std::exchange(o.owner_linked_, false)) {}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    name_ = std::move(o.name_);
    owner_linked_ = std::exchange(o.owner_linked_, false);
  }
  return *this;
}

Segment::~Segment() {
  reset();
}

void Segment::unlink_name(const std::string& name) {
  shm_unlink(name.c_str());
}

int Segment::unlink_names_of(pid_t pid, std::string_view launch_id) {
  // shm_open's names live in /dev/shm on Linux (glibc).
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  const std::string prefix = names_prefix(pid, launch_id).substr(1);  // no leading '/'

  std::vector<std::string> names;
  while (const dirent* e = readdir(dir))
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) names.push_back(e->d_name);
  closedir(dir);
  int removed = 0;
  for (const std::string& n : names) removed += shm_unlink(("/" + n).c_str()) == 0 ? 1 : 0;
  return removed;
}

void Segment::unlink() {
  if (owner_linked_) {
    shm_unlink(name_.c_str());
    owner_linked_ = false;
  }
}

void Segment::reset() noexcept {
  unlink();
  if (data_ != nullptr) munmap(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace commfuse::comm::shm
