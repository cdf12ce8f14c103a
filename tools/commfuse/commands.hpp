// Sub-commands of the `commfuse` tool. Each returns the process exit code.
#pragma once

namespace commfuse::cli {

int cmd_info(int argc, char** argv);
int cmd_selfcheck(int argc, char** argv);  // number-format self-check with timings
int cmd_demo(int argc, char** argv);
int cmd_launch(int argc, char** argv);  // start W local ranks of a program (launcher.hpp)

}  // namespace commfuse::cli
