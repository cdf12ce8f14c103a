// The local multi-rank launcher behind `commfuse launch` (and, later, `commfuse bench`, which
// starts its ranks by launching this executable's own `bench-worker` command).
//
// launch() starts `nprocs` copies of a program on this host with the torch-style `env://`
// variables set (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
// prefixes each line they print with "[rank r] ", stops every rank when one fails, and
// returns the exit code the launcher should exit with.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace commfuse::cli {

struct LaunchOptions {
  int nprocs = 1;
  // After the first failure the remaining ranks get this many seconds to exit by themselves,
  // then SIGTERM, then as long again before SIGKILL; a forwarded SIGINT/SIGTERM starts at
  // the SIGTERM step. 0 means SIGKILL at once.
  double grace_s = 5;
  int port = 0;        // MASTER_PORT; 0 picks a free port on 127.0.0.1
  bool prefix = true;  // false: ranks write straight to the launcher's stdout/stderr
  std::vector<std::pair<std::string, std::string>> extra_env;  // set in every rank
};

// Runs the ranks to completion. argv[0] is looked up in PATH (execvp). Returns 0 when every
// rank exits 0; otherwise the first failing rank's exit code, or 128 + signal number if it
// was killed by a signal (127 if the program cannot be executed); 128 + signal number when
// the launcher itself received SIGINT/SIGTERM before any rank failed. Progress and failure
// messages go to stderr prefixed "commfuse launch: ".
//
// Installs its own SIGINT/SIGTERM/SIGCHLD/SIGPIPE handlers for the duration of the call and
// restores the previous ones on return; not reentrant (one launch per process at a time).
int launch(const LaunchOptions& options, const std::vector<std::string>& argv);

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close). Another
// process may take it before rank 0 binds it; that race is accepted, as torchrun does.
int pick_free_port();

// The absolute path of the running executable (readlink /proc/self/exe), so that a command
// can launch ranks of itself: launch(opts, {self_exe_path(), "bench-worker", ...}).
std::string self_exe_path();

}  // namespace commfuse::cli
