// Loads gtrace's agent into a running process with ptrace: one thread is stopped at a safe
// point (not inside the dynamic loader, the allocator or CUDA), made to call dlopen() and then
// gtrace_agent_start(config), and restored exactly — every register, the extended FPU state
// and an interrupted system call — before it is released. Other threads keep running.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cli/result.h"
#include "discover/proc_maps.h"

namespace gtrace {

struct InjectionResult {
    int start_rc = 0;       // what gtrace_agent_start returned (0 started, 1 already running)
    bool loaded_now = false; // dlopen ran (false: the agent was already mapped)
    uint32_t tid = 0;        // the thread that made the calls
    int attempts = 0;        // stops until a safe point was found
};

// The runtime address of symbol `name` of the mapped file `path` in `maps`, or 0.
uint64_t mapped_symbol_address(const std::vector<Mapping>& maps, const std::string& path, const std::string& name);

// Injects `agent_path` into pid and starts it with `config`. Gives up (error, process
// untouched) when no thread reaches a safe point within `patience_ms`.
Result<InjectionResult> inject_agent(int pid, const std::string& agent_path, const std::string& config,
                                     int patience_ms = 2000);

} // namespace gtrace
