#include "collect/agent/cupti_session.h"

#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include <cupti.h>

#include "collect/agent/activity_records.h"
#include "collect/agent/call_capture.h"
#include "collect/agent/call_records.h"
#include "collect/agent/cupti_locate.h"
#include "collect/agent/job_profiler.h"
#include "collect/agent/self_time.h"
#include "collect/agent/session_state.h"
#include "collect/agent_ring.h"

uint64_t gtrace_agent_slots[GT_AGENT_SLOTS];

// gtrace's uprobe on this function learns where the slots are; it must stay a real call.
extern "C" __attribute__((visibility("default"), noinline)) void gtrace_agent_announce(uint64_t* slots) {
    __asm__ volatile("" : : "r"(slots) : "memory");
}

namespace gtrace::agent {
namespace {

constexpr size_t kBufferBytes = 1 << 20;
constexpr int kMaxBuffers = 16; // the agent never holds more than 16 MiB of CUPTI buffers

// The outermost CUPTI-visible call in progress on this thread, counted across both domains: a
// driver call the runtime makes inside a runtime call (cudaLaunchKernel → cuLaunchKernel) raises
// callbacks too, carrying the runtime call's id, and must leave the slot alone. Counted per
// session: a session that ends while a thread is inside a call never sees that call's exit, and a
// depth carried into the next session would silence the thread's calls for good.
std::atomic<uint32_t> g_session_generation{0};
struct CallDepth {
    uint32_t generation = 0;
    int depth = 0;
    uint64_t agent_records = 0; // GT_AGENT_SLOT_AGENT_RECORDS: the outermost call is the agent's to record
};
thread_local CallDepth t_calls;

// The slot of a thread (include/gtrace/agent.h): bit 63 while its outermost call runs, bit 62
// when the agent records that call, the tid, the call's correlation id. BPF reads it at a probed
// call's entry and return.
constexpr uint64_t kSlotInCall = GT_AGENT_SLOT_IN_CALL;

// Callbacks go on for every API that can put work on a GPU, found by name so that a CUPTI newer
// than these headers (new copy or launch variants) is covered too.
constexpr const char* kWorkPrefixes[] = {"cudaLaunch", "cudaMemcpy", "cudaMemset", "cudaGraphLaunch",
                                         "cuLaunch",   "cuMemcpy",   "cuMemset",   "cuGraphLaunch"};

uint32_t current_tid() { // a system call per API call would be most of the callback's cost
    thread_local uint32_t tid = static_cast<uint32_t>(gettid());
    return tid;
}

void api_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    uint32_t generation = g_session_generation.load(std::memory_order_relaxed);
    if (t_calls.generation != generation) t_calls = {generation, 0};
    Session& s = the_session();
    gt_agent_ring* ring = s.ring;
    uint64_t in_call;
    int api = -1;
    if (cb->callbackSite == CUPTI_API_ENTER) {
        if (++t_calls.depth != 1) return;
        in_call = kSlotInCall;
        // Whether the agent records the call is decided here, once: the exit must agree.
        api = ring && (__atomic_load_n(&ring->flags, __ATOMIC_ACQUIRE) & GT_AGENT_CALLS) ? api_of_callback(domain, cbid) : -1;
        t_calls.agent_records = api >= 0 ? GT_AGENT_SLOT_AGENT_RECORDS : 0;
    } else {
        // Callbacks can be switched on while a thread is inside a call: its exit then comes
        // without an entry, and must not leave the depth below zero.
        if (t_calls.depth == 0 || --t_calls.depth != 0) return;
        in_call = 0;
    }
    uint32_t tid = current_tid();
    __atomic_store_n(&gtrace_agent_slots[tid % GT_AGENT_SLOTS],
                     in_call | t_calls.agent_records | (uint64_t{tid} << 32) | cb->correlationId, __ATOMIC_RELEASE);
    if (!t_calls.agent_records || !ring) return;
    // s.ring itself, not `ring`: read again under the ring's lock (the session may stop meanwhile).
    if (in_call) call_entered(s.ring, s.ring_mutex, api, cb->correlationId);
    else call_exited(s.ring, s.ring_mutex, cb->correlationId, tid, cb->functionReturnValue);
}

} // namespace

void CUPTIAPI on_api_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    SelfTimer timer(SelfCost::Callback);
    api_callback(domain, cbid, data);
}

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    if (job_serves_request(buffer, size, max_records)) return; // the job's profiler's window: its own buffer
    *max_records = 0;
    if (the_session().buffers.fetch_add(1) >= kMaxBuffers) { // CUPTI drops and counts what has no buffer
        the_session().buffers.fetch_sub(1);
        *buffer = nullptr;
        *size = 0;
        std::lock_guard lock(the_session().ring_mutex);
        if (the_session().ring) ++the_session().ring->buffers_refused;
        return;
    }
    *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    std::lock_guard lock(the_session().buffers_mutex);
    if (*buffer) the_session().own_buffers.insert(*buffer);
}

void CUPTIAPI on_buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
    Session& s = the_session();
    bool own;
    {
        std::lock_guard lock(s.buffers_mutex);
        own = s.own_buffers.erase(buffer) != 0;
    }
    // The job's profiler's: read when it filled it beside the session, not when it predates it.
    const bool read = own || handed_by_job(buffer);
    bool job_kinds_in_own = false;
    {
        // The lock is let go every few hundred records: threads recording calls wait on it.
        constexpr int kRecordsPerLock = 256;
        std::unique_lock lock(s.ring_mutex);
        if (s.ring && read) {
            CUpti_Activity* record = nullptr;
            for (int n = 1; s.ring && s.cupti.cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS; ++n) {
                if (own && (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION || record->kind == CUPTI_ACTIVITY_KIND_OVERHEAD))
                    job_kinds_in_own = true;
                // The job's profiler's API records, in its buffers or beside the session's: not gtrace's.
                if ((record->kind == CUPTI_ACTIVITY_KIND_RUNTIME || record->kind == CUPTI_ACTIVITY_KIND_DRIVER) && !s.api_kinds)
                    continue;
                wait_for_room(lock, s.ring, s.reader_stalled); // still full after it: the record is dropped, and counted
                if (!s.ring) break;
                write_record(s.ring, record, s.trim);
                if (n % kRecordsPerLock == 0) {
                    lock.unlock();
                    lock.lock();
                }
            }
        }
        if (s.ring && calls_from_records()) send_waiting_calls(s.ring, false);
        if (s.ring) {
            size_t dropped = 0;
            if (s.cupti.cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS)
                s.ring->cupti_dropped += dropped;
        }
    }
    if (job_kinds_in_own) foreign_records_seen();
    if (!own) {
        give_back_job_buffer(context, stream, buffer, size, valid);
        return;
    }
    free(buffer);
    s.buffers.fetch_sub(1);
}

namespace {

// Switches the callbacks on for every GPU-work API of both domains; returns how many.
int enable_work_callbacks(Session& s) {
    const Cupti& c = s.cupti;
    CUpti_SubscriberHandle subscriber = s.subscriber;
    s.named_ids.clear();
    auto enable = [&](CUpti_CallbackDomain domain, uint32_t cbid) {
        bool on = c.cuptiEnableCallback(1, subscriber, domain, cbid) == CUPTI_SUCCESS;
        s.named_ids.back().callback_on = on;
        return on ? 1 : 0;
    };
    int enabled = 0;
    const std::pair<CUpti_CallbackDomain, uint32_t> domains[] = {
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE}, {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE}};
    for (auto [domain, size] : domains) {
        for (uint32_t cbid = 1; cbid < 2 * size; ++cbid) { // a newer CUPTI may have more ids
            const char* name = nullptr;
            if (c.cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) continue;
            map_callback_name(domain, cbid, name);
            s.named_ids.push_back({domain, cbid, false});
            if (is_table_api(domain, name)) { // synchronizations, allocations: recorded when gtrace asks
                enabled += enable(domain, cbid);
                continue;
            }
            for (const char* prefix : kWorkPrefixes) {
                size_t n = strlen(prefix);
                // "cuLaunch" must not match "cuLaunchHostFunc"'s kin by accident of case: the next
                // character starts a new word (an upper-case letter, '_' or the end).
                if (strncmp(name, prefix, n) == 0 && !(name[n] >= 'a' && name[n] <= 'z')) {
                    enabled += enable(domain, cbid);
                    break;
                }
            }
        }
    }
    return enabled;
}

} // namespace

void unsubscribe(Session& s) {
    if (s.subscriber) s.cupti.cuptiUnsubscribe(s.subscriber);
    s.subscriber = nullptr;
}

bool begin_work_callbacks(Session& s, gt_agent_ring* ring) {
    g_session_generation.fetch_add(1, std::memory_order_relaxed);
    reset_call_capture();
    if (enable_work_callbacks(s) == 0) return false;
    s.callbacks_on = true;
    __atomic_or_fetch(&ring->flags, GT_AGENT_CALLBACKS, __ATOMIC_RELEASE);
    return true;
}

namespace {

// The kinds the session records; empty, or why the first (kernels) was refused.
std::string enable_session_kinds(Session& s, gt_agent_ring* ring) {
    std::vector<CUpti_ActivityKind> kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                             CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                             CUPTI_ACTIVITY_KIND_MEMORY2};
    if (!(ring->flags & GT_AGENT_CALLBACKS)) { // join through the API records instead
        kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
        kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
    }
    for (auto kind : kinds) {
        if (enable_kind(s, kind) || kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
        CUptiResult r = s.alongside ? s.cupti.cuptiActivityEnable_v2(s.subscriber, kind, nullptr) : s.cupti.cuptiActivityEnable(kind);
        std::string why = std::string(ring->cupti_path) + " (the CUPTI found for this process's CUDA) refused "
                          "cuptiActivityEnable(CONCURRENT_KERNEL): " + result_text(r) + "; use --cupti to name the right one";
        if (s.alongside) {
            unsubscribe(s);
            return why;
        }
        share_cupti_end(s.foreign_subscriber);
        restore_job_callbacks(); // the job's profiler keeps its CUPTI
        return why;
    }
    return {};
}

} // namespace

std::string start_session(gt_agent_ring* ring, const SessionConfig& config) {
    Session& s = the_session();
    // CUPTI needs a working CUDA driver. The real libcupti (13.2, pip's nvidia-cuda-cupti), called
    // where there is none — or only the toolkit's stub — recurses without end in its own error
    // path and overflows the stack, on its first call whatever it is (cuptiGetVersion included):
    // a SIGSEGV in the traced job (seen with torch 2.15's wheels: torchrun's agent process, which
    // imports torch and never uses CUDA, died at its exit). Without a driver there is nothing to
    // record anyway.
    if (std::string why = driver_unusable(); !why.empty()) return why + ": nothing to record";
    if (!s.cupti.handle)
        if (std::string e = load_cupti(cupti_candidates(config.cupti_candidates)); !e.empty()) return e;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(s.cupti.cuptiActivityEnable), &info) && info.dli_fname)
        snprintf(ring->cupti_path, sizeof ring->cupti_path, "%s", info.dli_fname);
    {
        std::lock_guard lock(s.ring_mutex);
        s.ring = ring;
    }
    reset_self_time();
    measure_clock();
    // BPF reads a thread's slot at every traced call from now on. A .bss page never written is
    // not mapped, and each read of it would fault (~1 µs a call, measured): map them all now.
    for (size_t i = 0; i < GT_AGENT_SLOTS; i += 4096 / sizeof(uint64_t))
        __atomic_store_n(&gtrace_agent_slots[i], uint64_t{0}, __ATOMIC_RELAXED);
    gtrace_agent_announce(gtrace_agent_slots);
    // API records must name threads by their kernel tid (the default is pthread_self()).
    s.cupti.cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    s.api_kinds = s.ids_trimmed = s.foreign_subscriber = s.alongside = false;
    // The job's own profiler shares CUPTI with the session from here (job_profiler.h).
    watch_job_cupti(s.cupti.handle, ring->cupti_path);
    share_cupti_begin(sharing_side());
    if (CUptiResult r = s.cupti.cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed); r != CUPTI_SUCCESS) {
        share_cupti_end(false);
        restore_job_callbacks();
        // Refused as the unversioned API is in multi-subscriber mode: join the mode. Asked only
        // then, so that no subscriber-scoped call is ever made in a process that is not in it
        // (CUPTI refuses the two APIs together: Kineto's later windows must keep working).
        if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && multiple_subscribers_on(s.cupti)) {
            std::lock_guard control(s.control);
            s.alongside = true;
            {
                std::lock_guard lock(s.ring_mutex);
                s.trim = {};
            }
            if (std::string e = join_other_subscribers(s, ring, config.callbacks); !e.empty()) return e;
            return enable_session_kinds(s, ring);
        }
        return std::string(ring->cupti_path) + ": cuptiActivityRegisterCallbacks: " + result_text(r);
    }
    probe_open_window(); // no lock of the session's held: the job's callbacks may run in it
    std::lock_guard control(s.control);

    {
        std::lock_guard lock(s.ring_mutex);
        s.trim = {};
    }
    if (config.callbacks) {
        CUptiResult r = s.cupti.cuptiSubscribe(&s.subscriber, on_api_callback, nullptr);
        if (r == CUPTI_SUCCESS) {
            if (!begin_work_callbacks(s, ring))
                set_message(ring, "CUPTI names none of the launch, copy and set APIs; GPU work is joined through its API records");
        } else {
            s.subscriber = nullptr;
            s.foreign_subscriber = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
            set_message(ring, r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                                  ? "another tool (Kineto, nsys, a debugger) holds CUPTI's callback API; GPU work is "
                                    "joined to CPU calls through CUPTI's API records instead"
                                  : "cuptiSubscribe: " + result_text(r) + "; joining through CUPTI's API records");
        }
    }
    return enable_session_kinds(s, ring);
}

void flush_session(bool forced) {
    if (the_session().cupti.cuptiActivityFlushAll) the_session().cupti.cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

void with_session_ring(const std::function<void(gt_agent_ring*)>& write) {
    std::lock_guard lock(the_session().ring_mutex);
    if (the_session().ring) write(the_session().ring);
}

void forget_ring_in_child() { the_session().ring = nullptr; } // one thread in the child: no lock needed

std::mutex& session_ring_mutex() { return the_session().ring_mutex; }
gt_agent_ring* session_ring() { return the_session().ring; }

void stop_session() {
    Session& s = the_session();
    if (!s.cupti.handle) return;
    ShareEnd share;
    const bool alongside = s.alongside;
    {
        std::lock_guard control(s.control);
        if (!alongside) unsubscribe(s);
        if (s.callbacks_on) {
            // Calls in flight now will never show their end (no exit callback, and gtrace stops
            // reading): their GPU ops are past the capture's end. Left out, and counted.
            s.callbacks_on = false;
            StopTrim trim;
            for (uint32_t i = 0; i < GT_AGENT_SLOTS; ++i) {
                uint64_t v = __atomic_load_n(&gtrace_agent_slots[i], __ATOMIC_ACQUIRE);
                if (v & kSlotInCall) trim.in_flight.push_back(static_cast<uint32_t>(v));
                trim.after = std::max(trim.after, static_cast<uint32_t>(v));
            }
            std::sort(trim.in_flight.begin(), trim.in_flight.end());
            std::lock_guard lock(s.ring_mutex);
            s.trim = std::move(trim);
        }
        gtrace_agent_announce(nullptr);
        if (alongside) { // the session's own kinds; the other subscribers' are theirs
            for (auto kind : s.enabled) s.cupti.cuptiActivityDisable_v2(s.subscriber, kind, nullptr);
        } else {
            // The kinds the job's profiler has on stay on; CUPTI is finalized only when it holds nothing.
            share = share_cupti_end(s.foreign_subscriber);
            for (auto kind : share.disable) s.cupti.cuptiActivityDisable(kind);
            if (s.ids_trimmed && !share.may_finalize) apply_api_ids(s, true); // the job's ids as they were
        }
        s.ids_trimmed = false;
        s.enabled.clear();
    }
    s.cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); // the job's buffers go back to it in this
    if (alongside) { // flushed first, as CUPTI asks; no finalize: the other subscribers go on
        std::lock_guard control(s.control);
        unsubscribe(s);
        s.alongside = false;
    } else {
        restore_job_callbacks();
        if (share.may_finalize) s.cupti.cuptiFinalize();
    }
    std::lock_guard lock(s.ring_mutex);
    if (calls_from_records()) send_waiting_calls(s.ring, true);
    set_calls_from_records(false, false);
    reset_call_records();
    s.ring = nullptr;
}

bool start_call_records(bool with_stacks) {
    Session& s = the_session();
    std::lock_guard control(s.control);
    const Cupti& c = s.cupti;
    bool any_on = std::any_of(s.named_ids.begin(), s.named_ids.end(), [](const auto& id) { return id.callback_on; });
    // Multi-subscriber mode refuses the unversioned per-id calls: the callbacks time the calls.
    if (s.alongside || !c.cuptiActivityEnableRuntimeApi || !c.cuptiActivityEnableDriverApi || !any_on ||
        (!with_stacks && !c.cuptiEnableDomain))
        return false; // an older CUPTI: the callbacks time the calls
    // CUPTI 13.0 records nothing for ids switched on alone (seen on an H100, bench/README.md):
    // the kinds go on, then every id that is not one of ours goes off.
    for (auto kind : {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER})
        if (!enable_kind(s, kind)) return false;
    s.ids_trimmed = true;
    if (!job_wants_all_api()) apply_api_ids(s, false); // else at the end of the job's window
    return true;
}

void end_unneeded_callbacks(bool with_stacks) {
    Session& s = the_session();
    std::lock_guard control(s.control);
    const Cupti& c = s.cupti;
    if (!with_stacks && s.subscriber) { // nothing left for a callback to do: none is made
        c.cuptiEnableDomain(0, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
        c.cuptiEnableDomain(0, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
        s.callbacks_on = false; // the slots go stale: nothing to trim at the stop by them
    }
}

} // namespace gtrace::agent
