// What `commfuse bench` can run: the benchmarks, the options each family takes, their
// defaults and meaning. One table drives parsing, to_args and --help, so a benchmark or
// option cannot exist without being listed, nor be listed without being accepted.
#pragma once

#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench_options.hpp"

namespace commfuse::cli {

struct BenchInfo {
  std::string_view name;
  BenchFamily family;
  std::string_view summary;  // what it times against what, one line
};

struct BenchFamilyInfo {
  BenchFamily family;
  std::string_view title;
  std::string_view description;  // what a row shows
};

struct BenchOptionSpec {
  std::string_view short_name;  // "-n", or empty
  std::string_view long_name;   // "--nprocs"
  std::string_view metavar;     // "W"
  unsigned families;            // BenchFamily bits it applies to
  std::string_view default_value;
  std::string_view help;  // empty: internal (the parent's to the workers), never listed
  // Parses a value (UsageError naming `option`, as the user spelled it), and prints one.
  void (*set)(BenchOptions& o, std::string_view option, std::string_view value);
  std::string (*get)(const BenchOptions& o);
};

std::span<const BenchInfo> bench_catalog();
std::span<const BenchFamilyInfo> bench_families();
std::span<const BenchOptionSpec> bench_option_specs();
const BenchInfo* find_bench(std::string_view name);

// bench_help.cpp: every benchmark with its options (`commfuse bench --help`), and one
// benchmark's usage (`commfuse bench <name> --help`).
void print_bench_list(FILE* out);
void print_bench_usage(FILE* out, const BenchInfo& bench);
// `commfuse bench` with no arguments (the list on stderr, 2, as `commfuse` alone does), or
// with -h/--help (stdout, 0); nullopt if neither, and the benchmark should run.
std::optional<int> bench_help(const std::vector<std::string>& args);

}  // namespace commfuse::cli
