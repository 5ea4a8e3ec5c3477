// The agent as the process's NVTX injection: its implementations of the NVTX v3 API (ranges
// pushed and popped, started and ended, domains, registered strings) time every range in the
// process and write it, once ended, into the session's ring (GT_GPU_NVTX_RANGE).
//
// How NVTX v3 reaches them (nvtx3/nvtxDetail/nvtxImpl.h, nvtxInit.h): every module (executable
// or library) that includes the header-only NVTX has its own hidden table of function pointers,
// nvtxGlobals_v3; each API call loads its slot and calls it when it is not null. On a module's
// first call, NVTX dlopens NVTX_INJECTION64_PATH and calls its InitializeInjectionNvtx2 with the
// module's nvtxGetExportTable, whose callbacks table hands out the slots to fill; the slots left
// unfilled become null. Record mode sets that variable to this library; attach mode fills tables
// of running modules that gtrace found (nvtx_tables.h).
#pragma once
#include <cstdint>

namespace gtrace::agent {

// A module's function tables as its NVTX hands them out (NvtxExportTableCallbacks'
// GetModuleFunctionTable): false when the module offers no such table.
using GetModuleTable = int (*)(int module, void**** table, unsigned int* size);

// What putting the agent's functions into a module's slots found.
enum class NvtxFill {
    Filled,      // the agent's functions are in
    AlreadyOurs, // they were already
    OtherTool,   // a slot holds another tool's function: nothing was changed
    Unusable,    // the module's tables are not as NVTX v3 lays them out
};
enum class FillMode {
    Injecting,    // inside NVTX's own initialization: the slots hold its init stubs, overwritten
    Running,      // an initialized module: only null slots (no tool) are filled
    Initializing, // a module never used, whose initialization the agent took over: every slot
                  // that is not the agent's becomes null, as NVTX's own init leaves them
};
NvtxFill fill_nvtx_slots(GetModuleTable get_table, FillMode mode);
// Whether every slot the agent fills is there (changes nothing).
bool nvtx_slots_reachable(GetModuleTable get_table);

// Launch mode: ranges that end before the first session has a ring are kept (a bounded
// number) and written when it does.
void keep_nvtx_until_session();
void flush_pending_nvtx(); // a session's ring exists now
void forget_nvtx_in_child();

} // namespace gtrace::agent
