#include "collect/agent/job_profiler.h"

#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

#include "collect/agent/got_patch.h"

namespace gtrace::agent {
namespace {

// The functions behind the job's redirected calls.
struct Real {
    decltype(&::cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
    decltype(&::cuptiActivityEnable) enable = nullptr;
    decltype(&::cuptiActivityDisable) disable = nullptr;
    decltype(&::cuptiActivityFlushAll) flush_all = nullptr;
    decltype(&::cuptiFinalize) finalize = nullptr;
    decltype(&::cuptiSubscribe) subscribe = nullptr;
    decltype(&::cuptiUnsubscribe) unsubscribe = nullptr;
};

// Kineto's buffer callbacks, exported by libtorch_cpu (libkineto/src/CuptiActivityApi.h): the
// job's pair when gtrace meets a process whose profiler registered before gtrace could see it.
constexpr const char* kKinetoRequested = "_ZN9libkineto16CuptiActivityApi25bufferRequestedTrampolineEPPhPmS3_";
constexpr const char* kKinetoCompleted = "_ZN9libkineto16CuptiActivityApi25bufferCompletedTrampolineEP8CUctx_stjPhmm";

struct Shared {
    std::mutex mutex;
    Real real;
    std::vector<std::string> importers;
    // The job's client as its calls showed it.
    CUpti_BuffersCallbackRequestFunc job_requested = nullptr;
    CUpti_BuffersCallbackCompleteFunc job_completed = nullptr;
    bool job_registered = false; // its pair is what CUPTI would hold, were gtrace not there
    std::set<int> job_kinds;     // kinds it has on
    // gtrace's session beside it.
    bool recording = false;
    SessionSide side;
    std::set<int> session_kinds; // kinds gtrace's session switched on
    std::atomic<bool> serve_from_job{false}; // new buffers are the job's (its window is open)
    bool window_open = false, found_open = false, all_api = false;
    uint64_t window_from_ns = 0;
    std::set<uint8_t*> job_buffers; // handed to CUPTI from the job's callback, not yet completed
    uint64_t buffers_lost = 0;      // the job's buffers that reached gtrace and could not go back
    bool finalize_waiting = false;
    bool job_subscribed = false; // the job holds CUPTI's callback API
};

Shared& shared() {
    static Shared* s = new Shared; // never destroyed: the job's redirected calls and CUPTI's may come during exit
    return *s;
}

uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool is_api_kind(int kind) { return kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER; }

bool session_needs(const Shared& s, int kind) { return s.recording && s.session_kinds.count(kind); }

// The job's window opened (a first kind on) or closed; under the mutex. Opening while gtrace
// records: gtrace's own buffers are completed first, so that the job's records start in its own.
void window_opens(Shared& s, std::unique_lock<std::mutex>& lock) {
    s.window_open = true;
    s.window_from_ns = now_ns();
    if (!s.recording) return;
    lock.unlock();
    s.real.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    lock.lock();
    s.serve_from_job = s.job_completed != nullptr;
}

void window_closes(Shared& s) {
    s.window_open = false;
    if (s.recording && s.side.report_window) s.side.report_window(s.window_from_ns, now_ns(), s.found_open, s.buffers_lost);
    s.found_open = false;
    s.buffers_lost = 0;
}

void set_all_api(Shared& s, bool on) {
    if (s.all_api == on || !s.side.all_api_records) return;
    s.all_api = on;
    s.side.all_api_records(on);
}

// --- the job's calls, redirected ---

CUptiResult job_register_callbacks(CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed) {
    Shared& s = shared();
    std::unique_lock lock(s.mutex);
    if (!requested || !completed) return CUPTI_ERROR_INVALID_PARAMETER;
    s.job_requested = requested, s.job_completed = completed, s.job_registered = true;
    if (s.recording) { // gtrace's stay registered; the job's buffers go through them to it
        if (s.window_open) s.serve_from_job = true;
        return CUPTI_SUCCESS;
    }
    lock.unlock();
    return s.real.register_callbacks(requested, completed);
}

CUptiResult job_enable(CUpti_ActivityKind kind) {
    Shared& s = shared();
    std::unique_lock lock(s.mutex);
    const bool opens = s.job_kinds.empty() && !s.window_open;
    s.job_kinds.insert(kind);
    if (opens) window_opens(s, lock);
    if (s.recording && is_api_kind(kind)) set_all_api(s, true);
    lock.unlock();
    return s.real.enable(kind);
}

CUptiResult job_disable(CUpti_ActivityKind kind) {
    Shared& s = shared();
    std::unique_lock lock(s.mutex);
    s.job_kinds.erase(kind);
    if (s.recording && is_api_kind(kind) && !s.job_kinds.count(CUPTI_ACTIVITY_KIND_RUNTIME) &&
        !s.job_kinds.count(CUPTI_ACTIVITY_KIND_DRIVER))
        set_all_api(s, false);
    // A window found open has no kinds known: its first disable closes it, as an emptied one does.
    if (s.window_open && s.job_kinds.empty()) window_closes(s);
    if (session_needs(s, kind)) return CUPTI_SUCCESS; // still gtrace's: stays on
    lock.unlock();
    return s.real.disable(kind);
}

CUptiResult job_flush_all(uint32_t flag) {
    Shared& s = shared();
    CUptiResult r = s.real.flush_all(flag); // its buffers come back through gtrace's callback to it
    std::lock_guard lock(s.mutex);
    // Its window closed and its last buffers are back: new buffers are gtrace's again.
    if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) && !s.window_open) s.serve_from_job = false;
    return r;
}

CUptiResult job_finalize() {
    Shared& s = shared();
    std::unique_lock lock(s.mutex);
    if (!s.recording) {
        s.job_registered = false, s.job_kinds.clear();
        lock.unlock();
        return s.real.finalize();
    }
    // Finalizing would end gtrace's session too: its buffers go back to it now, CUPTI forgets it
    // as finalize would, and the finalize itself happens at gtrace's stop.
    lock.unlock();
    s.real.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    lock.lock();
    for (int kind : s.job_kinds)
        if (!session_needs(s, kind)) s.real.disable(static_cast<CUpti_ActivityKind>(kind));
    s.job_kinds.clear();
    if (s.window_open) window_closes(s);
    set_all_api(s, false);
    s.job_registered = false, s.serve_from_job = false, s.finalize_waiting = true;
    return CUPTI_SUCCESS;
}

CUptiResult job_subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
    Shared& s = shared();
    bool (*yield)() = nullptr;
    {
        std::lock_guard lock(s.mutex);
        if (s.recording) yield = s.side.yield_callbacks;
    }
    CUptiResult r = s.real.subscribe(subscriber, callback, userdata);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && yield && yield()) r = s.real.subscribe(subscriber, callback, userdata);
    std::lock_guard lock(s.mutex);
    if (r == CUPTI_SUCCESS) s.job_subscribed = true;
    return r;
}

CUptiResult job_unsubscribe(CUpti_SubscriberHandle subscriber) {
    Shared& s = shared();
    CUptiResult r = s.real.unsubscribe(subscriber);
    std::lock_guard lock(s.mutex);
    if (r == CUPTI_SUCCESS) s.job_subscribed = false;
    return r;
}

// Kineto's callbacks where the job's process exports them (any object that imports CUPTI).
void assume_kineto_callbacks(Shared& s) {
    for (const std::string& object : s.importers) {
        void* h = dlopen(object == "(the program)" ? nullptr : object.c_str(), RTLD_LAZY | RTLD_NOLOAD);
        if (!h) continue;
        auto requested = reinterpret_cast<CUpti_BuffersCallbackRequestFunc>(dlsym(h, kKinetoRequested));
        auto completed = reinterpret_cast<CUpti_BuffersCallbackCompleteFunc>(dlsym(h, kKinetoCompleted));
        dlclose(h);
        if (requested && completed) {
            s.job_requested = requested, s.job_completed = completed;
            return;
        }
    }
}

} // namespace

std::vector<std::string> watch_job_cupti(void* cupti, const std::string& cupti_path) {
    Shared& s = shared();
    std::lock_guard lock(s.mutex);
    std::vector<GotRedirect> redirects = {
        {"cuptiActivityRegisterCallbacks", reinterpret_cast<void*>(&job_register_callbacks), reinterpret_cast<void**>(&s.real.register_callbacks)},
        {"cuptiActivityEnable", reinterpret_cast<void*>(&job_enable), reinterpret_cast<void**>(&s.real.enable)},
        {"cuptiActivityDisable", reinterpret_cast<void*>(&job_disable), reinterpret_cast<void**>(&s.real.disable)},
        {"cuptiActivityFlushAll", reinterpret_cast<void*>(&job_flush_all), reinterpret_cast<void**>(&s.real.flush_all)},
        {"cuptiFinalize", reinterpret_cast<void*>(&job_finalize), reinterpret_cast<void**>(&s.real.finalize)},
        {"cuptiSubscribe", reinterpret_cast<void*>(&job_subscribe), reinterpret_cast<void**>(&s.real.subscribe)},
        {"cuptiUnsubscribe", reinterpret_cast<void*>(&job_unsubscribe), reinterpret_cast<void**>(&s.real.unsubscribe)},
    };
    // Only imports that resolve to the session's own functions are redirected (got_patch.h).
    for (GotRedirect& g : redirects) *g.real = dlsym(cupti, g.symbol);
    // Never CUPTI itself (its internal calls) nor the agent (it calls CUPTI through dlsym).
    std::string cupti_name = cupti_path.substr(cupti_path.rfind('/') + 1);
    GotPatchResult r = redirect_imports(redirects, {cupti_name.empty() ? "libcupti" : cupti_name, "libcupti.so"});
    for (auto& name : r.bound)
        if (std::find(s.importers.begin(), s.importers.end(), name) == s.importers.end()) s.importers.push_back(name);
    return s.importers;
}

void share_cupti_begin(const SessionSide& side) {
    Shared& s = shared();
    std::lock_guard lock(s.mutex);
    s.side = side;
    s.recording = true;
    s.session_kinds.clear();
    s.buffers_lost = 0, s.all_api = false, s.found_open = false;
    if (!s.job_registered && !s.job_completed) assume_kineto_callbacks(s);
    s.serve_from_job = s.window_open && s.job_completed;
    if (s.window_open) { // seen opening while the agent was dormant
        s.window_from_ns = now_ns();
        if (s.job_kinds.count(CUPTI_ACTIVITY_KIND_RUNTIME) || s.job_kinds.count(CUPTI_ACTIVITY_KIND_DRIVER)) s.all_api = true;
    }
}

void probe_open_window() {
    Shared& s = shared();
    {
        std::lock_guard lock(s.mutex);
        if (s.importers.empty()) return; // nothing in the process calls the session's CUPTI: no job client
    }
    // A buffer the job's window was filling is completed to gtrace's callback now (CUPTI keeps
    // one pair): give_back_job_buffer sees it is neither gtrace's nor known, and takes the
    // window as open.
    s.real.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

void session_kind_on(CUpti_ActivityKind kind) {
    Shared& s = shared();
    std::lock_guard lock(s.mutex);
    s.session_kinds.insert(kind);
}

ShareEnd share_cupti_end() {
    Shared& s = shared();
    std::lock_guard lock(s.mutex);
    ShareEnd end;
    // A window found open has kinds gtrace never saw switched on: all stay on, for the job to end.
    for (int kind : s.session_kinds)
        if (!s.job_kinds.count(kind) && !(s.window_open && s.found_open)) end.disable.push_back(static_cast<CUpti_ActivityKind>(kind));
    if (s.window_open && s.side.report_window) s.side.report_window(s.window_from_ns, 0, s.found_open, s.buffers_lost);
    // CUPTI's finalize forgets every client's callbacks and kinds: only when the job has none.
    end.may_finalize = (s.finalize_waiting || (!s.job_registered && s.job_kinds.empty() && !s.window_open)) && !s.job_subscribed;
    s.recording = false;
    s.finalize_waiting = false;
    return end;
}

void restore_job_callbacks() {
    Shared& s = shared();
    std::lock_guard lock(s.mutex);
    s.serve_from_job = false;
    if (s.job_registered && s.real.register_callbacks) s.real.register_callbacks(s.job_requested, s.job_completed);
}

bool job_serves_request(uint8_t** buffer, size_t* size, size_t* max_records) {
    Shared& s = shared();
    if (!s.serve_from_job.load(std::memory_order_acquire)) return false;
    CUpti_BuffersCallbackRequestFunc requested;
    {
        std::lock_guard lock(s.mutex);
        requested = s.job_requested;
    }
    if (!requested) return false;
    requested(buffer, size, max_records); // the job's code: no lock held
    if (!*buffer) return true;            // it has none to give: CUPTI drops, and counts, as it would for it
    std::lock_guard lock(s.mutex);
    s.job_buffers.insert(*buffer);
    return true;
}

bool handed_by_job(uint8_t* buffer) {
    Shared& s = shared();
    std::lock_guard lock(s.mutex);
    return s.job_buffers.count(buffer) != 0;
}

void give_back_job_buffer(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
    Shared& s = shared();
    CUpti_BuffersCallbackCompleteFunc completed;
    {
        std::unique_lock lock(s.mutex);
        if (!s.job_buffers.erase(buffer) && !s.window_open) {
            // One the job's window was filling before gtrace started: the window is open.
            s.window_open = s.found_open = true;
            s.window_from_ns = now_ns();
            s.serve_from_job = s.job_completed != nullptr;
            if (s.recording) set_all_api(s, true);
        }
        completed = s.job_completed;
        if (!completed) { // not known: the buffer is kept (not freed: it is not gtrace's), and counted
            ++s.buffers_lost;
            return;
        }
    }
    completed(context, stream, buffer, size, valid);
}


} // namespace gtrace::agent
