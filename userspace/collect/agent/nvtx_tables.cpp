#include "collect/agent/nvtx_tables.h"

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "collect/agent/cupti_session.h"
#include "collect/agent/nvtx_injection.h"
#include "collect/agent_ring.h"

namespace gtrace::agent {
namespace {

// The head of NVTX v3's nvtxGlobals_t (nvtx3/nvtxDetail/nvtxImpl.h): the init state, then the
// two export tables nvtxGetExportTable hands to a tool. The function pointers that follow vary
// between NVTX releases and are reached only through GetModuleFunctionTable.
struct GlobalsHead {
    volatile unsigned int init_state;
    NvtxExportTableCallbacks callbacks;
    NvtxExportTableVersionInfo version;
};
constexpr unsigned kFresh = 0, kStarted = 1, kComplete = 2; // NVTX_INIT_STATE_*

// Whether `p` lies in an object the dynamic loader mapped, and which one.
const void* object_of(const void* p) {
    Dl_info info{};
    return dladdr(p, &info) ? info.dli_fbase : nullptr;
}

// Whether [address, address + size) lies in one writable mapping of this process: gtrace named
// the address from its own reading of the module, which a mistake (or a process that remapped
// its data since) can make wrong; the agent must never fault the process on it.
bool writable_here(uint64_t address, size_t size) {
    FILE* f = fopen("/proc/self/maps", "re");
    if (!f) return false;
    bool found = false;
    char line[512];
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long start = 0, end = 0;
        char perms[5] = {};
        if (sscanf(line, "%llx-%llx %4s", &start, &end, perms) == 3 && perms[0] == 'r' && perms[1] == 'w' && address >= start &&
            address + size <= end)
            found = true;
    }
    fclose(f);
    return found;
}

uint32_t install(uint64_t address) {
    auto* head = reinterpret_cast<GlobalsHead*>(address);
    if (address % alignof(GlobalsHead) != 0 || !writable_here(address, sizeof(GlobalsHead))) return GT_NVTX_TABLE_INVALID;
    const void* object = object_of(head);
    if (!object || head->callbacks.struct_size != sizeof(NvtxExportTableCallbacks) ||
        head->version.struct_size != sizeof(NvtxExportTableVersionInfo) || head->version.version != 3 ||
        !head->callbacks.GetModuleFunctionTable ||
        object_of(reinterpret_cast<const void*>(head->callbacks.GetModuleFunctionTable)) != object)
        return GT_NVTX_TABLE_INVALID;
    auto get_table = reinterpret_cast<GetModuleTable>(head->callbacks.GetModuleFunctionTable);
    // Checked before the state is touched: once the agent holds a module's initialization, it
    // must leave every slot valid (a stub left in place would call itself for ever).
    if (!nvtx_slots_reachable(get_table)) return GT_NVTX_TABLE_INVALID;
    // Another thread may be inside the module's first NVTX call: its initialization ends within
    // microseconds (without a tool: an environment lookup); wait a little for it.
    for (int tries = 0; tries < 200; ++tries) {
        unsigned state = __atomic_load_n(&head->init_state, __ATOMIC_ACQUIRE);
        if (state == kComplete) {
            switch (fill_nvtx_slots(get_table, FillMode::Running)) {
            case NvtxFill::Filled: return GT_NVTX_TABLE_INSTALLED;
            case NvtxFill::AlreadyOurs: return GT_NVTX_TABLE_OURS;
            case NvtxFill::OtherTool: return GT_NVTX_TABLE_OTHER_TOOL;
            case NvtxFill::Unusable: return GT_NVTX_TABLE_INVALID;
            }
        }
        unsigned expected = kFresh;
        if (state == kFresh && __atomic_compare_exchange_n(&head->init_state, &expected, kStarted, false,
                                                           __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            fill_nvtx_slots(get_table, FillMode::Initializing); // reachable: it fills
            __atomic_store_n(&head->init_state, kComplete, __ATOMIC_SEQ_CST);
            return GT_NVTX_TABLE_INITIALIZED;
        }
        usleep(1000);
    }
    return GT_NVTX_TABLE_BUSY;
}

} // namespace

void install_nvtx_tables(gt_agent_ring* ring, const std::vector<uint64_t>& tables) {
    for (uint64_t address : tables) {
        uint32_t status = install(address);
        std::lock_guard lock(session_ring_mutex());
        uint64_t pos = 0;
        auto* r = agent_ring_reserve_record<gt_nvtx_module>(ring, sizeof(gt_nvtx_module), GT_GPU_NVTX_MODULE, 0, &pos);
        if (!r) continue;
        r->table = address;
        r->status = status;
        agent_ring_commit(ring, pos, r->h.size);
    }
}

} // namespace gtrace::agent
