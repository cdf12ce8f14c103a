#include "core/algorithm.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"

namespace commfuse {

namespace {

constexpr std::string_view kAlgorithmOps[] = {
    // shm's collectives and the fused operators' streams (shm_transport.cpp)
    "all_gather", "all_to_all", "broadcast", "all_reduce", "gather_stream", "all_to_all_stream",
    // the operators (src/ops/*/plan.cpp)
    "all_gather_matmul", "matmul_reduce_scatter", "matmul_all_reduce", "alltoall_matmul",
    "alltoall_quant_matmul", "quant_all_reduce", "quant_reduce_scatter"};

// Calls f(op, name) for each <op>:<name> item of COMMFUSE_ALGO, in order.
template <typename F>
void for_each_forced(const std::string& value, F&& f) {
  std::string_view rest = value;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    CF_CHECK_ARG(colon != std::string_view::npos && colon > 0 && colon + 1 < item.size(),
                 "COMMFUSE_ALGO='", value, "': '", item, "' is not <op>:<algorithm>");
    if (f(item.substr(0, colon), item.substr(colon + 1))) return;
  }
}

}  // namespace

std::span<const std::string_view> algorithm_ops() {
  return kAlgorithmOps;
}

std::string forced_algorithm(std::string_view op) {
  const std::string value = params::get_string("COMMFUSE_ALGO");
  std::string forced;
  for_each_forced(value, [&](std::string_view o, std::string_view name) {
    if (o != op) return false;
    forced = name;
    return true;
  });
  return forced;
}

void check_forced_algorithms() {
  const std::string value = params::get_string("COMMFUSE_ALGO");
  std::vector<std::pair<std::string_view, std::string_view>> seen;
  for_each_forced(value, [&](std::string_view op, std::string_view name) {
    if (std::find(std::begin(kAlgorithmOps), std::end(kAlgorithmOps), op) ==
        std::end(kAlgorithmOps)) {
      std::string ops;
      for (const std::string_view o : kAlgorithmOps) ops += detail::cat(ops.empty() ? "" : ", ", o);
      detail::throw_status(Status::kParamInvalid,
                           detail::cat("COMMFUSE_ALGO='", value, "': '", op,
                                       "' is not an op with algorithms (", ops, ")"));
    }
    for (const auto& [o, n] : seen)
      CF_CHECK_ARG(o != op || n == name, "COMMFUSE_ALGO='", value, "' forces ", op, " twice, to ",
                   n, " and to ", name);
    seen.emplace_back(op, name);
    return false;
  });
}

size_t choose_algorithm(const char* op, const std::function<std::string()>& what,
                        const std::vector<AlgorithmEntry>& list) {
  CF_ASSERT(!list.empty());
  const std::string forced = forced_algorithm(op);
  size_t chosen = list.size();
  if (!forced.empty()) {
    std::string names;
    for (size_t i = 0; i < list.size(); ++i) {
      names += detail::cat(i ? "|" : "", list[i].name);
      if (forced == list[i].name) chosen = i;
    }
    CF_CHECK_ARG(chosen < list.size(), "COMMFUSE_ALGO: ", op, " has no algorithm '", forced, "' (",
                 names, ")");
    CF_CHECK_ARG(list[chosen].not_applicable.empty(), "COMMFUSE_ALGO: ", op, ":", forced,
                 " does not apply to ", what(), ": ", list[chosen].not_applicable);
  } else {
    for (size_t i = 0; i < list.size() && chosen == list.size(); ++i)
      if (list[i].not_applicable.empty() && list[i].not_preferred.empty()) chosen = i;
    for (size_t i = 0; i < list.size() && chosen == list.size(); ++i)
      if (list[i].not_applicable.empty()) chosen = i;
    CF_ASSERT(chosen < list.size());  // the reference applies to every valid descriptor
  }
  if (log::verbose_level() >= 1) {
    std::string line = detail::cat(
        "decision ", what(), " [ISA ", cpu::isa_level_name(cpu::highest_level(cpu::features())),
        "]: ", list[chosen].name,
        forced.empty() ? " (first preferred)" : " (forced by COMMFUSE_ALGO)");
    for (size_t i = 0; i < list.size(); ++i) {
      if (i == chosen) continue;
      const AlgorithmEntry& e = list[i];
      line += detail::cat("; ", e.name, ": ",
                          !e.not_applicable.empty()  ? e.not_applicable
                          : !e.not_preferred.empty() ? "applies, not preferred: " + e.not_preferred
                          : i < chosen               ? std::string("applies, not forced")
                                                     : std::string("applies, later in list"));
    }
    log::verbose(line);
  }
  return chosen;
}

}  // namespace commfuse
