// `commfuse bench <benchmark>`: starts W ranks under mpirun (so OpenMPI's own collective
// can be timed in the same processes, same run) and lets them run bench-worker.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "bench_catalog.hpp"
#include "bench_options.hpp"
#include "cli_args.hpp"
#include "comm/shm/cma.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/trace.hpp"
#include "launcher.hpp"

namespace commfuse::cli {

namespace {

// commfuse info's core-to-core probe, measured now; "no run finished" where the two threads
// never ran on two cores at once within its deadline.
std::string sync_probe_text() {
  const double us = comm::shm::measure_thread_sync_us();
  if (us < 0) return "no run finished";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f us", us);
  return buf;
}

void check_output_paths(const BenchOptions& o) {
  for (const auto& [option, path] :
       {std::pair<const char*, const std::string&>{"--json", o.json}, {"--trace", o.trace}}) {
    if (path.empty()) continue;
    if (const std::string why = trace::path_problem(path); !why.empty())
      throw UsageError(std::string(option) + ": cannot write '" + path + "': " + why);
  }
  // One file for both, also before either exists ("x.json" and "./x.json", made absolute
  // first: weakly_canonical leaves a relative name of nothing that exists as it is) and
  // through a hard link: the rows and the trace events had been mixed into it. A device for
  // both (/dev/null) mixes nothing.
  if (o.json.empty() || o.trace.empty()) return;
  struct stat json_st = {};
  struct stat trace_st = {};
  const bool json_there = stat(o.json.c_str(), &json_st) == 0;
  if (json_there && S_ISCHR(json_st.st_mode)) return;
  namespace fs = std::filesystem;
  std::error_code e1, e2, e3, e4;
  const bool same_name = fs::weakly_canonical(fs::absolute(o.json, e1), e2) ==
                             fs::weakly_canonical(fs::absolute(o.trace, e3), e4) &&
                         !e1 && !e2 && !e3 && !e4;
  const bool same_file = json_there && stat(o.trace.c_str(), &trace_st) == 0 &&
                         json_st.st_dev == trace_st.st_dev && json_st.st_ino == trace_st.st_ino;
  if (same_name || same_file)
    throw UsageError("--json and --trace name the same file, '" + o.json +
                     "' (the rows and the trace events would be mixed)");
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (const auto rc = bench_help(args)) return *rc;
  BenchOptions o = parse_bench_options(args);
  o.port = pick_free_port();
  std::vector<std::string> cmd = {COMMFUSE_MPIEXEC, "--allow-run-as-root", "--oversubscribe"};
  if (o.transport == "mpi") {
    // What a multi-machine job uses: MPI over TCP, for our transport and the baseline alike.
    for (const char* a : {"--mca", "btl", "tcp,self"}) cmd.push_back(a);
  }
  // Rank 0 writes --json after its first row, every rank --trace: a path they cannot write
  // is a usage error now, not an MPI_Abort of every worker once they have started (or a
  // warning and no trace). Checked without truncating a file that is there and before
  // anything here needs cleaning up.
  check_output_paths(o);
  if (!o.trace.empty()) {
    // Every rank appends to the file (core/trace.hpp): start it empty. Before the session
    // directory exists, which a refusal here had left behind.
    FILE* f = std::fopen(o.trace.c_str(), "w");
    if (f == nullptr)
      throw UsageError("--trace: cannot write '" + o.trace + "': " + std::strerror(errno));
    std::fclose(f);
  }
  // Its own Open MPI session directory base: two mpiruns starting at once (a bench next to
  // a test run) race to create the shared /tmp/ompi.<host>.<uid>, and one fails in
  // orte_init ("mkdir ... File exists", Open MPI 4.1). mpirun empties it; we remove it.
  char session[] = "/tmp/commfuse-bench-XXXXXX";
  const bool own_session = mkdtemp(session) != nullptr;
  if (own_session)
    for (const char* a : {"--mca", "orte_tmpdir_base", static_cast<const char*>(session)})
      cmd.push_back(a);
  std::vector<const char*> env_flags = {"-x", "COMMFUSE_TRANSPORT"};
  if (!o.trace.empty()) {
    setenv("COMMFUSE_TRACE", o.trace.c_str(), 1);
    for (const char* a : {"-x", "COMMFUSE_TRACE"}) env_flags.push_back(a);
  }
  // One app context for all ranks, or with --netns one per rank (mpirun's "A : B" form),
  // each wrapped in `ip netns exec`. mpirun itself stays in this namespace, so the ranks'
  // PMIx client must reach its server over the namespaces' link: the server then accepts
  // connections from other addresses (bench/netns.sh also names the interface it listens
  // on, PMIX_MCA_ptl_tcp_if_include).
  if (!o.netns.empty()) setenv("PMIX_MCA_ptl_tcp_remote_connections", "1", 0);
  const int contexts = o.netns.empty() ? 1 : o.nprocs;
  for (int c = 0; c < contexts; ++c) {
    if (c > 0) cmd.push_back(":");
    for (const char* a : env_flags) cmd.push_back(a);
    cmd.push_back("-n");
    cmd.push_back(std::to_string(o.netns.empty() ? o.nprocs : 1));
    if (!o.netns.empty())
      for (const std::string& a : {std::string("ip"), std::string("netns"), std::string("exec"),
                                   o.netns[c % o.netns.size()]})
        cmd.push_back(a);
    cmd.push_back(self_exe_path());
    cmd.push_back("bench-worker");
    for (const auto& a : to_args(o)) cmd.push_back(a);
  }

  setenv("COMMFUSE_TRANSPORT", o.transport.c_str(), 1);
  // How fast a cache line moves between two cores of this machine now, before and after
  // the run: on a virtual machine it changes with where the host runs its CPUs, and the
  // times follow (the AMD EPYC VM: 0.03 us in some minutes, 0.13-0.16 in others, where a
  // W = 2 all_gather of 1 MiB through the shm slots took 250 us instead of 35, and the
  // fused all_gather_matmul over TCP lost its 1.35x lead over the unfused one).
  std::printf("# core-to-core synchronization before the run: %s (commfuse info's probe)\n",
              sync_probe_text().c_str());
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("commfuse bench: fork");
    return 1;
  }
  if (pid == 0) {
    std::vector<char*> cargv;
    for (auto& a : cmd) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "commfuse bench: cannot execute %s\n", cargv[0]);
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (own_session) rmdir(session);  // left in place if mpirun could not empty it
  std::printf("# core-to-core synchronization after the run: %s\n", sync_probe_text().c_str());
  // The help promises 0, 1 or 2: mpirun's own codes (255: a rank it could not start, an
  // MPI_Abort's code, a signal) all mean that a rank failed.
  if (WIFEXITED(status) && WEXITSTATUS(status) <= 2) return WEXITSTATUS(status);
  if (WIFEXITED(status))
    std::fprintf(stderr, "commfuse bench: mpirun exited with status %d: a rank failed\n",
                 WEXITSTATUS(status));
  else
    std::fprintf(stderr, "commfuse bench: mpirun was killed by signal %d\n",
                 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return 1;
}

}  // namespace commfuse::cli
