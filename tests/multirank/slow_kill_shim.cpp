// For shm_exit_after_init_w2 (LD_PRELOAD): the first kill(pid, 0) of the rank that
// CF_SHIM_SLOW_KILL_RANK names sleeps 500 ms first, so that a peer exiting right after set-up
// has exited before this rank first asks whether it is alive. kill(pid, 0) is commfuse's
// liveness check (shm/peer_set.cpp): a rank that first asked after the peer's exit took it
// for a process it cannot see and never watched it (the race lost 1 run in 5-12 unaided).
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

extern "C" int kill(pid_t pid, int sig) {
  static bool slept = false;
  if (sig == 0 && !slept) {
    slept = true;
    const char* target = std::getenv("CF_SHIM_SLOW_KILL_RANK");
    const char* me = std::getenv("RANK");
    if (target != nullptr && me != nullptr && std::atoi(target) == std::atoi(me))
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return static_cast<int>(syscall(SYS_kill, pid, sig));
}
