// The one W = 1 communicator every op target calls on, created once per process
// (LLVMFuzzerInitialize): at W = 1 an op is local, so one process exercises the whole path.
#pragma once

#include <commfuse/commfuse.h>

#include <string>

#include "support/byte_reader.hpp"

namespace commfuse_fuzz {

// Creates the communicator (tcp:// on a free loopback port) and pins the environment the
// targets assume: one compute thread (2 shared cores; deterministic), short peer timeouts.
void init_fuzz_comm();
commfuseComm_t fuzz_comm();
// Its group name.
const char* fuzz_group();

// A group argument: mostly the communicator's name, else an unknown name, a near miss
// (a prefix, an extension), nullptr, "" or raw bytes.
const char* decode_group(ByteReader& r, std::string& storage);

// A rejected call must leave the communicator usable (commfuse.h: only transport failures
// and aborts make it unusable).
void require_comm_usable(const char* after);

}  // namespace commfuse_fuzz
