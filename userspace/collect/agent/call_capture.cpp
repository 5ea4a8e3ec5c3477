#include "collect/agent/call_capture.h"

#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "collect/agent/call_records.h"
#include "collect/agent/py_walk.h"
#include "collect/agent/self_time.h"
#include "collect/agent_ring.h"
#include "gtrace/cuda_api.h"

namespace gtrace::agent {
namespace {

constexpr uint32_t kMaxCbid = 4096; // CUPTI's ids are far below this
std::array<int16_t, kMaxCbid> g_runtime_api, g_driver_api; // api id + 1; 0: not in the table

const std::unordered_map<std::string_view, int>& table_names() {
    static const std::unordered_map<std::string_view, int> names = [] {
        std::unordered_map<std::string_view, int> n;
#define GT_API_NAME(id, symbol, caps, decode) n.emplace(symbol, GT_API_##id);
        GT_CUDA_API_LIST(GT_API_NAME)
#undef GT_API_NAME
        return n;
    }();
    return names;
}

// Stack ids whose frames went out this session: open addressing, insert-only, lock-free. A full
// neighbourhood only means a definition is sent again (bytes, never a wrong stack).
constexpr size_t kSentSlots = 1 << 16;
constexpr int kProbes = 16;
std::array<std::atomic<uint64_t>, kSentSlots> g_sent;
std::atomic<uint32_t> g_session{1};

bool first_sighting(uint64_t id) {
    size_t i = (id * 0x9e3779b97f4a7c15ull) >> 48;
    for (int p = 0; p < kProbes; ++p, i = (i + 1) & (kSentSlots - 1)) {
        uint64_t seen = g_sent[i].load(std::memory_order_relaxed);
        if (seen == id) return false;
        if (seen == 0 && g_sent[i].compare_exchange_strong(seen, id, std::memory_order_relaxed)) return true;
        if (seen == id) return false;
    }
    return true;
}

PyWalker g_walker;
std::mutex g_layout_mutex;

struct ThreadCall {
    uint32_t session = 0;
    int api = -1;
    uint64_t start = 0, stack = 0, last_stack = 0;
    uint8_t py_status = GT_PY_NONE;
    uint32_t calls = 0;
};
thread_local ThreadCall t_call;

} // namespace

uint64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// The ring is read only under its lock, here as in call_exited: a session that stops meanwhile
// unmaps it, and a read of it after that would crash the traced job. The walk itself, which
// reads only the interpreter's memory, runs unlocked.
void walk_stack(gt_agent_ring* const& session_ring, std::mutex& ring_mutex) {
    {
        std::lock_guard lock(ring_mutex);
        gt_agent_ring* ring = session_ring;
        if (!ring) return;
        uint32_t epoch = __atomic_load_n(&ring->py_layout.epoch, __ATOMIC_ACQUIRE);
        uint32_t every = ring->py_stack_every;
        if (!epoch || !every || t_call.calls++ % every) return;
        if (epoch != g_walker.epoch()) {
            std::lock_guard layout_lock(g_layout_mutex);
            if (epoch != g_walker.epoch()) g_walker.set_layout(ring->py_layout, static_cast<uint32_t>(getpid()));
        }
    }
    gt_py_frame frames[GT_PY_MAX_FRAMES];
    PyWalkResult w;
    {
        SelfTimer timer(SelfCost::PyWalk);
        w = g_walker.walk(frames);
    }
    t_call.py_status = w.status;
    if (w.status != GT_PY_OK) {
        if (g_walker.refused()) {
            std::lock_guard lock(ring_mutex);
            if (session_ring) __atomic_add_fetch(&session_ring->py_walks_refused, 1, __ATOMIC_RELAXED);
        }
        return;
    }
    t_call.stack = w.id;
    if (w.id == t_call.last_stack || !first_sighting(w.id)) return;
    std::lock_guard lock(ring_mutex);
    if (!session_ring) return; // the session stopped during the walk: its ring is gone
    gt_agent_ring* ring = session_ring;
    uint64_t pos = 0;
    size_t bytes = sizeof(gt_gpu_pystack) + w.nframes * sizeof(gt_py_frame);
    auto* r = agent_ring_reserve_record<gt_gpu_pystack>(ring, bytes, GT_GPU_PYSTACK, 0, &pos);
    if (!r) return; // the calls naming it show no frames; the drop is counted
    r->id = w.id;
    r->nframes = w.nframes;
    r->truncated = w.truncated;
    std::memcpy(r->frames, frames, w.nframes * sizeof(gt_py_frame));
    agent_ring_commit(ring, pos, r->h.size);
    t_call.last_stack = w.id;
}


// CUPTI names runtime callbacks with the version that introduced them ("cudaLaunchKernel_v7000",
// "cudaMemcpyAsync_ptsz_v7000"); the exported symbol has no such suffix. Driver names are the
// symbols themselves ("cuMemcpyHtoD_v2" is a real export): left alone.
std::string_view symbol_of(CUpti_CallbackDomain domain, std::string_view name) {
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return name;
    size_t v = name.rfind("_v");
    if (v == std::string_view::npos || v + 2 == name.size()) return name;
    for (size_t i = v + 2; i < name.size(); ++i)
        if (name[i] < '0' || name[i] > '9') return name;
    return name.substr(0, v);
}

void map_callback_name(CUpti_CallbackDomain domain, uint32_t cbid, const char* name) {
    if (cbid >= kMaxCbid || !name) return;
    auto it = table_names().find(symbol_of(domain, name));
    auto& table = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? g_runtime_api : g_driver_api;
    table[cbid] = static_cast<int16_t>(it == table_names().end() ? 0 : it->second + 1);
}

int api_of_callback(CUpti_CallbackDomain domain, uint32_t cbid) {
    if (cbid >= kMaxCbid) return -1;
    return (domain == CUPTI_CB_DOMAIN_RUNTIME_API ? g_runtime_api : g_driver_api)[cbid] - 1;
}

bool is_table_api(CUpti_CallbackDomain domain, const char* name) {
    return name && table_names().contains(symbol_of(domain, name));
}

void begin_call_capture(gt_agent_ring* ring, bool from_records, bool with_callbacks) {
    // The calls that start from `since` on are the agent's; those before it the uprobes' (still
    // on until gtrace reads the flag). API records are on already: those of earlier calls are
    // left out (call_records.cpp), so `since` is set before the first record can be sent.
    __atomic_store_n(&ring->calls_since_ns, monotonic_ns(), __ATOMIC_RELEASE);
    set_calls_from_records(from_records, from_records && with_callbacks && ring->py_stack_every != 0);
    __atomic_or_fetch(&ring->flags, GT_AGENT_CALLS | (from_records ? GT_AGENT_CALL_RECORDS : 0), __ATOMIC_RELEASE);
}

void reset_call_capture() {
    for (auto& slot : g_sent) slot.store(0, std::memory_order_relaxed);
    g_session.fetch_add(1, std::memory_order_relaxed);
}

void call_entered(gt_agent_ring* const& session_ring, std::mutex& ring_mutex, int api, uint32_t correlation) {
    uint32_t session = g_session.load(std::memory_order_relaxed);
    if (t_call.session != session) t_call = {session};
    t_call.api = api;
    t_call.stack = 0;
    t_call.py_status = GT_PY_NONE;
    walk_stack(session_ring, ring_mutex);
    if (calls_from_records()) { // CUPTI's API record is the call: only its stack is needed here
        remember_stack(correlation, {t_call.stack, t_call.py_status});
        t_call.api = -1;
        return;
    }
    t_call.start = monotonic_ns(); // after the walk: the call's own time, not gtrace's
}

void call_exited(gt_agent_ring* const& session_ring, std::mutex& ring_mutex, uint32_t correlation, uint32_t tid,
                 const void* return_value) {
    if (t_call.api < 0 || t_call.session != g_session.load(std::memory_order_relaxed)) return;
    // cudaError_t and CUresult are both enums the size of an int.
    int32_t ret = return_value ? *static_cast<const int32_t*>(return_value) : 0;
    ApiRecord call{t_call.api, false, correlation, tid, t_call.start, monotonic_ns(), ret};
    t_call.api = -1;
    std::lock_guard lock(ring_mutex);
    // The session's ring as it is now, under its lock: a session that stopped while this call
    // ran has let its ring go (seen: a write into the unmapped ring when gtrace stopped early).
    if (session_ring) write_call_record(session_ring, call, {t_call.stack, t_call.py_status});
}

} // namespace gtrace::agent
