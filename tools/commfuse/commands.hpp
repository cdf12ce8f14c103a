// Sub-commands of the `commfuse` tool. Each returns the process exit code.
#pragma once

namespace commfuse::cli {

int cmd_info(int argc, char** argv);
int cmd_selfcheck(int argc, char** argv);     // number-format self-check with timings
int cmd_demo(int argc, char** argv);          // formats self-check + operators on 8 ranks
int cmd_demo_worker(int argc, char** argv);   // one rank of cmd_demo (under commfuse launch)
int cmd_launch(int argc, char** argv);        // start W local ranks of a program (launcher.hpp)
int cmd_bench(int argc, char** argv);         // collective benchmarks vs OpenMPI, same run
int cmd_bench_worker(int argc, char** argv);  // one rank of cmd_bench (under mpirun)

}  // namespace commfuse::cli

namespace commfuse {
class Comm;
}

namespace commfuse::cli {

// demo_alltoall.cpp: the demo's alltoall_quant_matmul A16W8 row; returns the failure count.
int demo_alltoall_quant_matmul_row(Comm& comm);

}  // namespace commfuse::cli
