// Loads gtrace's agent into a running process with ptrace: one thread is stopped at a safe
// point (not inside the dynamic loader, the allocator or CUDA) and handed a call to dlopen()
// that returns through a sigreturn frame restoring it exactly — every register, the extended
// FPU state, its signal mask and an interrupted system call. gtrace lets go of the thread before
// the call even starts, so nothing depends on gtrace surviving. Other threads keep running.
// The agent then waits, dormant, for gtrace's request in its mailbox (gtrace/agent.h). In a
// container the library is first made reachable at a path of the process's own (agent_placement.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "foundation/result.h"
#include "discover/proc_maps.h"
#include "discover/target_files.h"

namespace gtrace {

struct InjectionResult {
    bool loaded_now = false; // dlopen was started (false: the agent was already mapped)
    uint32_t tid = 0;        // the thread that made the calls
    int attempts = 0;        // stops until a safe point was found
};

// The runtime address of symbol `name` of the file of mapping `file` of pid (all of whose
// mappings are in `maps`), or 0.
uint64_t mapped_symbol_address(int pid, const std::vector<Mapping>& maps, const Mapping& file, const std::string& name,
                               TargetFiles& files);

// Makes pid dlopen `agent_path` unless it has already (`again`: even then — a no-op dlopen, for
// tests of the borrowed call). Gives up (error, process untouched) when no thread reaches a
// safe point within `patience_ms`.
Result<InjectionResult> load_agent(int pid, const std::string& agent_path, int patience_ms = 2000, bool again = false);

} // namespace gtrace
