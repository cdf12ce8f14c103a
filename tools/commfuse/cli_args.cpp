#include "cli_args.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <system_error>

namespace commfuse::cli {
namespace {

[[noreturn]] void bad_value(std::string_view option, std::string_view value,
                            const std::string& why) {
  throw UsageError(std::string(option) + ": '" + std::string(value) + "' " + why);
}

std::string range_text(int64_t min, int64_t max) {
  if (max == std::numeric_limits<int64_t>::max()) return "must be at least " + std::to_string(min);
  return "must be in " + std::to_string(min) + ".." + std::to_string(max);
}

// The whole of s as a finite number; from_chars alone would also take "inf" and "nan".
std::optional<double> whole_decimal(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

}  // namespace

int64_t parse_integer(std::string_view option, std::string_view value, int64_t min, int64_t max) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  const bool whole = !value.empty() && end == value.data() + value.size();
  if (ec == std::errc::result_out_of_range && whole) bad_value(option, value, range_text(min, max));
  if (ec != std::errc() || !whole)
    bad_value(option, value,
              min >= 1   ? "is not a positive integer"
              : min == 0 ? "is not a non-negative integer"
                         : "is not an integer");
  if (v < min || v > max) bad_value(option, value, range_text(min, max));
  return v;
}

double parse_real(std::string_view option, std::string_view value, double min, bool min_exclusive) {
  const auto v = whole_decimal(value);
  if (!v) bad_value(option, value, "is not a number");
  if (min_exclusive ? !(*v > min) : !(*v >= min)) {
    char bound[32];
    std::snprintf(bound, sizeof(bound), "%g", min);
    bad_value(option, value,
              std::string(min_exclusive ? "must be greater than " : "must be at least ") + bound);
  }
  return *v;
}

uint64_t parse_size(std::string_view option, std::string_view value) {
  // The number is the leading digits and dots, the unit the rest.
  size_t split = 0;
  while (split < value.size() &&
         (std::isdigit(static_cast<unsigned char>(value[split])) || value[split] == '.'))
    ++split;
  const std::string_view number = value.substr(0, split), unit = value.substr(split);
  double mult = 0;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "k" || unit == "KiB")
    mult = 1024;
  else if (unit == "M" || unit == "m" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "g" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  const auto v = whole_decimal(number);
  if (!v || mult == 0)
    bad_value(option, value, "is not a size (a number with an optional K, M or G suffix, e.g. 4K)");
  const double size = *v * mult;
  if (size != std::floor(size)) bad_value(option, value, "is not a whole number");
  // 2^53: every size up to it is exact in a double (the step loops are in double).
  if (size < 1 || size > 9007199254740992.0) bad_value(option, value, "must be in 1..2^53");
  return static_cast<uint64_t>(size);
}

std::optional<int> no_options(int argc, char** argv, const char* usage) {
  if (argc < 2) return std::nullopt;
  const std::string_view arg = argv[1];
  if (arg == "-h" || arg == "--help") {
    std::fputs(usage, stdout);
    return 0;
  }
  throw UsageError(arg.substr(0, 1) == "-" ? "unknown option '" + std::string(arg) + "'"
                                           : "unexpected argument '" + std::string(arg) + "'");
}

}  // namespace commfuse::cli
