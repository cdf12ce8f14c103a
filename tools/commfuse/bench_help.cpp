// `commfuse bench --help` and `commfuse bench <name> --help`, printed from the tables in
// bench_catalog.cpp so that the help cannot drift from what the parser accepts.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

#include "bench_catalog.hpp"

namespace commfuse::cli {
namespace {

constexpr int kWidth = 96;       // wrap column: fits a 100-column terminal
constexpr int kNameColumn = 26;  // option or benchmark names, then their text

constexpr std::string_view kIntro =
    "Starts W ranks under mpirun (so that OpenMPI's own collective can be timed in the same "
    "processes) and times commfuse against its baselines in alternating rounds; rank 0 prints "
    "the median round, as a mean over ranks. Exit code: 0; 1 if a result is wrong or a rank "
    "fails; 2 for a usage error.";

constexpr std::string_view kValues =
    "Values are checked: numbers must be whole (F: decimal) and in range, a SIZE is a count "
    "with an optional K, M or G suffix (x1024). --name=value and -n2 are accepted too.";

// Prints `text` from column `col` (where the cursor is) and wraps at kWidth, continuation
// lines starting at column `indent`; ends the line.
void print_wrapped(FILE* out, std::string_view text, int col, int indent) {
  bool first = true;
  while (!text.empty()) {
    const size_t end = text.find(' ');
    const std::string_view word = text.substr(0, end);
    const int need = static_cast<int>(word.size()) + (first ? 0 : 1);
    if (!first && col + need > kWidth) {
      std::fprintf(out, "\n%*s", indent, "");
      col = indent;
      first = true;
    }
    std::fprintf(out, "%s%.*s", first ? "" : " ", static_cast<int>(word.size()), word.data());
    col += static_cast<int>(word.size()) + (first ? 0 : 1);
    first = false;
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  std::fprintf(out, "\n");
}

// "  name   text", the text wrapped in its column.
void print_entry(FILE* out, int indent, const std::string& name, std::string_view text) {
  std::fprintf(out, "%*s%-*s ", indent, "", kNameColumn - 1, name.c_str());
  const int col = indent + std::max(kNameColumn, static_cast<int>(name.size()) + 1);
  print_wrapped(out, text, col, indent + kNameColumn);
}

void print_options(FILE* out, unsigned family, bool common, int indent) {
  for (const auto& s : bench_option_specs()) {
    if (s.help.empty() || !(s.families & family) || (s.families == kAllFamilies) != common)
      continue;
    std::string name = s.short_name.empty() ? "    " : std::string(s.short_name) + ", ";
    name += std::string(s.long_name) + " " + std::string(s.metavar);
    std::string text(s.help);
    if (s.default_value != "-") text += " (default " + std::string(s.default_value) + ")";
    print_entry(out, indent, name, text);
  }
}

void print_common_options(FILE* out, int indent) {
  print_options(out, kAllFamilies, true, indent);
  print_entry(out, indent, "-h, --help", "this text");
}

}  // namespace

void print_bench_list(FILE* out) {
  std::fprintf(out,
               "usage: commfuse bench <benchmark> [options]\n"
               "       commfuse bench <benchmark> --help   (that benchmark's options only)\n\n");
  print_wrapped(out, kIntro, 0, 0);
  for (const auto& f : bench_families()) {
    std::fprintf(out, "\n%.*s: ", static_cast<int>(f.title.size()), f.title.data());
    print_wrapped(out, f.description, static_cast<int>(f.title.size()) + 2, 2);
    for (const auto& b : bench_catalog())
      if (b.family == f.family) print_entry(out, 2, std::string(b.name), b.summary);
    std::fprintf(out, "  options:\n");
    print_options(out, f.family, false, 4);
  }
  std::fprintf(out, "\noptions of every benchmark:\n");
  print_common_options(out, 2);
  std::fprintf(out, "\n");
  print_wrapped(out, kValues, 0, 0);
}

void print_bench_usage(FILE* out, const BenchInfo& bench) {
  std::fprintf(out, "usage: commfuse bench %.*s [options]\n\n", static_cast<int>(bench.name.size()),
               bench.name.data());
  print_wrapped(out, bench.summary, 0, 0);
  for (const auto& f : bench_families())
    if (f.family == bench.family) print_wrapped(out, f.description, 0, 0);
  std::fprintf(out, "\noptions:\n");
  print_common_options(out, 2);
  print_options(out, bench.family, false, 2);
  std::fprintf(out, "\n");
  print_wrapped(out, kValues, 0, 0);
}

std::optional<int> bench_help(const std::vector<std::string>& args) {
  if (args.empty()) {
    print_bench_list(stderr);
    return 2;
  }
  auto is_help = [](const std::string& a) { return a == "-h" || a == "--help"; };
  if (is_help(args[0])) {
    print_bench_list(stdout);
    return 0;
  }
  const BenchInfo* bench = find_bench(args[0]);
  if (bench == nullptr) return std::nullopt;  // the parser says it is unknown
  for (size_t i = 1; i < args.size(); ++i)
    if (is_help(args[i])) {
      print_bench_usage(stdout, *bench);
      return 0;
    }
  return std::nullopt;
}

}  // namespace commfuse::cli
