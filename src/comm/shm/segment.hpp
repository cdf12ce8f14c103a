// One POSIX shared-memory segment: created 0600 under an unpredictable name by its owner,
// mapped by the peers on the same host, unlinked by the owner once every peer has mapped
// it (so a crash afterwards leaves nothing in /dev/shm). The name starts with the owner's
// pid and its launch id (COMMFUSE_LAUNCH_ID, set by commfuse launch and commfuse.spawn), so
// that a launcher can remove what a rank killed before that left behind — and only that,
// though pids repeat across containers that share /dev/shm.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace commfuse::comm::shm {

class Segment {
 public:
  // Creates and maps a new zero-filled segment of bytes bytes (name
  // "/commfuse-<pid>-<launch id or 0>-<random>").
  static Segment create(size_t bytes);
  // Maps an existing segment created by a peer.
  static Segment open(const std::string& name, size_t bytes);

  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();  // unmaps; unlinks too if this process created it and has not unlinked yet

  // Removes the name; the mapping stays valid. Idempotent.
  void unlink();
  // Removes a peer's segment name (no error if it is gone): a rank whose group setup failed
  // after the peers' names were exchanged removes them, so that a peer killed before it
  // unlinked its own leaves nothing in /dev/shm.
  static void unlink_name(const std::string& name);
  // Removes every segment name process pid of launch launch_id created
  // (/dev/shm/commfuse-<pid>-<launch id>-*): `commfuse launch` calls it for each rank it
  // reaps, since a rank killed between creating its segment and telling its peers the name
  // leaves it where no peer can find it. Returns how many it removed.
  static int unlink_names_of(pid_t pid, std::string_view launch_id);

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }

 private:
  void reset() noexcept;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
  bool owner_linked_ = false;
};

}  // namespace commfuse::comm::shm
