#include "comm/bootstrap/init_method.hpp"

#include <charconv>
#include <cstdlib>

#include "core/error.hpp"

namespace commfuse::comm {
namespace {

constexpr std::string_view kForms = "expected tcp://host:port, env:// or mpi";

// Whole-string decimal parse; no sign, no spaces, no trailing junk.
bool parse_uint(std::string_view s, long long max, long long* out) {
  if (s.empty() || s.size() > 10) return false;
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v > max) return false;
  *out = v;
  return true;
}

int parse_port(std::string_view s, std::string_view what) {
  long long v = 0;
  CF_CHECK_ARG(parse_uint(s, 65535, &v) && v >= 1, "init_method: ", what, " '", s,
               "' is not a port number in [1, 65535]");
  return static_cast<int>(v);
}

// Splits "host:port" or "[v6]:port" (the part after "tcp://").
void parse_tcp_address(std::string_view spec, std::string_view address, InitMethod* out) {
  std::string_view host, port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    CF_CHECK_ARG(
        close != std::string_view::npos && close + 1 < address.size() && address[close + 1] == ':',
        "init_method: '", spec, "' has an unterminated IPv6 address; expected ",
        "tcp://[addr]:port");
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    CF_CHECK_ARG(colon != std::string_view::npos, "init_method: '", spec,
                 "' has no port; expected tcp://host:port");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    // "tcp://::1:29500" is ambiguous; the URL convention is brackets.
    CF_CHECK_ARG(host.find(':') == std::string_view::npos, "init_method: '", spec,
                 "': write an IPv6 address in brackets, tcp://[addr]:port");
  }
  CF_CHECK_ARG(!host.empty(), "init_method: '", spec, "' has an empty host; expected ",
               "tcp://host:port");
  CF_CHECK_ARG(host.find_first_of("/?#@ \t[]") == std::string_view::npos, "init_method: '", spec,
               "': host '", host, "' contains a character not allowed in a host name");
  out->host = std::string(host);
  out->port = parse_port(port, "port");
}

const char* getenv_nonempty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

// RANK / WORLD_SIZE: the variable if set, else the argument; both given must agree.
int env_int(const char* var, const char* arg_name, int arg) {
  const char* text = getenv_nonempty(var);
  if (text == nullptr) {
    CF_CHECK_ARG(arg >= 0, "init_method env://: environment variable ", var, " is not set (and no ",
                 arg_name, " argument was given)");
    return arg;
  }
  long long v = 0;
  CF_CHECK_ARG(parse_uint(text, 1 << 30, &v), "init_method env://: ", var, "='", text,
               "' is not an integer in [0, 2^30]");
  CF_CHECK_ARG(arg < 0 || arg == v, "init_method env://: ", arg_name, " argument is ", arg, " but ",
               var, "=", v);
  return static_cast<int>(v);
}

void check_rank_and_size(int rank, int world_size) {
  CF_CHECK_ARG(world_size >= 1, "init_method: world_size is ", world_size, " but must be >= 1");
  CF_CHECK_ARG(rank >= 0 && rank < world_size, "init_method: rank is ", rank, " but world_size is ",
               world_size, " (rank must be in [0, ", world_size, "))");
}

}  // namespace

InitMethod parse_init_method(std::string_view init_method, int rank, int world_size) {
  constexpr std::string_view kTcp = "tcp://";
  InitMethod m;
  if (init_method.starts_with(kTcp)) {
    m.kind = InitKind::kTcp;
    parse_tcp_address(init_method, init_method.substr(kTcp.size()), &m);
    m.rank = rank;
    m.world_size = world_size;
    check_rank_and_size(rank, world_size);
  } else if (init_method == "env://") {
    m.kind = InitKind::kEnv;
    const char* addr = getenv_nonempty("MASTER_ADDR");
    CF_CHECK_ARG(addr != nullptr,
                 "init_method env://: environment variable MASTER_ADDR is not set");
    std::string_view host = addr;
    // torch writes IPv6 MASTER_ADDR bare; accept the bracketed URL form as well.
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    m.host = std::string(host);
    const char* port = getenv_nonempty("MASTER_PORT");
    CF_CHECK_ARG(port != nullptr,
                 "init_method env://: environment variable MASTER_PORT is not set");
    m.port = parse_port(port, "MASTER_PORT");
    m.rank = env_int("RANK", "rank", rank);
    m.world_size = env_int("WORLD_SIZE", "world_size", world_size);
    check_rank_and_size(m.rank, m.world_size);
  } else if (init_method == "mpi") {
    m.kind = InitKind::kMpi;
    m.rank = rank;
    m.world_size = world_size;
  } else {
    CF_CHECK_ARG(false, "init_method: '", init_method, "' is not supported; ", kForms);
  }
  return m;
}

}  // namespace commfuse::comm
