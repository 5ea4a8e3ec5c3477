#include "collect/agent/job_profiler.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

#include "collect/agent/call_capture.h" // monotonic_ns
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
    std::mutex mutex; // never held while calling CUPTI, the job's code or the loader
    Real real;        // set before any slot points at a wrapper; not changed after
    std::vector<std::string> importers;
    // The job's client as its calls showed it.
    CUpti_BuffersCallbackRequestFunc job_requested = nullptr;
    CUpti_BuffersCallbackCompleteFunc job_completed = nullptr;
    bool job_registered = false; // its pair is what CUPTI would hold, were gtrace not there
    bool job_subscribed = false; // it holds CUPTI's callback API
    std::set<int> job_kinds;     // kinds it has on
    // gtrace's session beside it.
    bool recording = false;
    SessionSide side;
    std::set<int> session_kinds; // kinds gtrace's session switched on
    std::atomic<bool> serve_from_job{false}; // new buffers are the job's (its window is open)
    std::atomic<bool> exiting{false};        // the process exits: the job's code may be gone
    bool window_open = false, found_open = false, all_api = false;
    bool found_by_kinds = false; // found open by its kinds in gtrace's own buffers: its records till then went there
    uint64_t window_from_ns = 0;
    std::set<uint8_t*> job_buffers; // handed to CUPTI from the job's callback, not yet completed
    uint64_t buffers_lost = 0;      // the job's buffers that reached gtrace and could not go back
    bool finalize_waiting = false;  // the job finalized during the session: done at gtrace's stop
};

Shared& shared() {
    static Shared* s = new Shared; // never destroyed: the job's redirected calls and CUPTI's may come during exit
    return *s;
}

bool is_api_kind(int kind) { return kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER; }

bool session_needs(const Shared& s, int kind) { return s.recording && s.session_kinds.count(kind); }

// What a decision under the mutex leaves to do after it: session calls that reach CUPTI or
// the ring, made with the mutex let go.
struct After {
    int all_api = -1; // 0/1: switch the session's API-record filter
    bool report = false;
    uint64_t from_ns = 0, to_ns = 0, lost = 0;
    bool found_open = false, found_by_kinds = false;
    SessionSide side;
    void run() const {
        if (all_api >= 0 && side.all_api_records) side.all_api_records(all_api == 1);
        if (report && side.report_window) side.report_window(from_ns, to_ns, found_open, found_by_kinds, lost);
    }
};

void want_all_api(Shared& s, bool on, After& after) {
    if (s.all_api == on || !s.recording) return;
    s.all_api = on;
    after.all_api = on ? 1 : 0;
    after.side = s.side;
}

void window_closes(Shared& s, After& after) {
    s.window_open = false;
    if (s.recording) {
        after.report = true, after.from_ns = s.window_from_ns, after.to_ns = monotonic_ns();
        after.found_open = s.found_open, after.found_by_kinds = s.found_by_kinds, after.lost = s.buffers_lost, after.side = s.side;
    }
    s.found_open = s.found_by_kinds = false;
    s.buffers_lost = 0;
}

// --- the job's calls, redirected ---

CUptiResult job_register_callbacks(CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed) {
    Shared& s = shared();
    if (!requested || !completed) return CUPTI_ERROR_INVALID_PARAMETER;
    {
        std::lock_guard lock(s.mutex);
        s.job_requested = requested, s.job_completed = completed, s.job_registered = true;
        s.finalize_waiting = false; // a new start after its finalize
        if (s.recording) { // gtrace's stay registered; the job's buffers go through them to it
            if (s.window_open) s.serve_from_job = true;
            return CUPTI_SUCCESS;
        }
    }
    return s.real.register_callbacks(requested, completed);
}

CUptiResult job_enable(CUpti_ActivityKind kind) {
    Shared& s = shared();
    bool opens, recording;
    {
        std::lock_guard lock(s.mutex);
        opens = s.job_kinds.empty() && !s.window_open;
        recording = s.recording;
        s.finalize_waiting = false;
    }
    // Opening while gtrace records: gtrace's own buffers are completed first, so that the
    // job's records start in its own.
    if (opens && recording) s.real.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    CUptiResult r = s.real.enable(kind);
    After after;
    {
        std::lock_guard lock(s.mutex);
        if (r != CUPTI_SUCCESS) return r;
        s.job_kinds.insert(kind);
        if (!s.window_open) s.window_open = true, s.window_from_ns = monotonic_ns();
        s.serve_from_job = s.recording && s.job_completed && s.job_requested;
        if (is_api_kind(kind)) want_all_api(s, true, after);
    }
    after.run();
    return r;
}

CUptiResult job_disable(CUpti_ActivityKind kind) {
    Shared& s = shared();
    After after;
    bool keep;
    {
        std::lock_guard lock(s.mutex);
        s.job_kinds.erase(kind);
        if (is_api_kind(kind) && !s.job_kinds.count(CUPTI_ACTIVITY_KIND_RUNTIME) && !s.job_kinds.count(CUPTI_ACTIVITY_KIND_DRIVER))
            want_all_api(s, false, after);
        // A window found open has no kinds known: its first disable closes it, as an emptied one does.
        if (s.window_open && s.job_kinds.empty()) window_closes(s, after);
        keep = session_needs(s, kind); // still gtrace's: stays on
    }
    after.run();
    return keep ? CUPTI_SUCCESS : s.real.disable(kind);
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
    bool recording;
    {
        std::lock_guard lock(s.mutex);
        recording = s.recording;
        if (!recording) s.job_registered = s.job_subscribed = false, s.job_kinds.clear(), s.window_open = false;
    }
    // Not under the mutex: finalize completes buffers, through gtrace's callback when it is still
    // the registered one, and that callback takes the mutex.
    if (!recording) return s.real.finalize();
    // Finalizing would end gtrace's session too: its buffers go back to it now, CUPTI forgets it
    // as finalize would, and the finalize itself happens at gtrace's stop.
    s.real.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::vector<int> off;
    After after;
    {
        std::lock_guard lock(s.mutex);
        for (int kind : s.job_kinds)
            if (!session_needs(s, kind)) off.push_back(kind);
        s.job_kinds.clear();
        if (s.window_open) window_closes(s, after);
        want_all_api(s, false, after);
        s.job_registered = false, s.serve_from_job = false, s.finalize_waiting = true;
    }
    for (int kind : off) s.real.disable(static_cast<CUpti_ActivityKind>(kind));
    after.run();
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

// Kineto's callbacks where one of these objects exports them; looked up with no lock held.
std::pair<CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc> kineto_callbacks(const std::vector<std::string>& objects) {
    for (const std::string& object : objects) {
        void* h = dlopen(object == "(the program)" ? nullptr : object.c_str(), RTLD_LAZY | RTLD_NOLOAD);
        if (!h) continue;
        auto requested = reinterpret_cast<CUpti_BuffersCallbackRequestFunc>(dlsym(h, kKinetoRequested));
        auto completed = reinterpret_cast<CUpti_BuffersCallbackCompleteFunc>(dlsym(h, kKinetoCompleted));
        dlclose(h);
        if (requested && completed) return {requested, completed};
    }
    return {nullptr, nullptr};
}

} // namespace

std::vector<std::string> watch_job_cupti(void* cupti, const std::string& cupti_path) {
    Shared& s = shared();
    // The session's own functions: the only ones redirected calls may reach (set once, before
    // any slot points at a wrapper; the same library every time).
    Real real;
    std::vector<GotRedirect> redirects = {
        {"cuptiActivityRegisterCallbacks", reinterpret_cast<void*>(&job_register_callbacks), reinterpret_cast<void**>(&real.register_callbacks)},
        {"cuptiActivityEnable", reinterpret_cast<void*>(&job_enable), reinterpret_cast<void**>(&real.enable)},
        {"cuptiActivityDisable", reinterpret_cast<void*>(&job_disable), reinterpret_cast<void**>(&real.disable)},
        {"cuptiActivityFlushAll", reinterpret_cast<void*>(&job_flush_all), reinterpret_cast<void**>(&real.flush_all)},
        {"cuptiFinalize", reinterpret_cast<void*>(&job_finalize), reinterpret_cast<void**>(&real.finalize)},
        {"cuptiSubscribe", reinterpret_cast<void*>(&job_subscribe), reinterpret_cast<void**>(&real.subscribe)},
        {"cuptiUnsubscribe", reinterpret_cast<void*>(&job_unsubscribe), reinterpret_cast<void**>(&real.unsubscribe)},
    };
    bool complete = true;
    for (GotRedirect& g : redirects) complete = (*g.real = dlsym(cupti, g.symbol)) && complete;
    {
        std::lock_guard lock(s.mutex);
        // An incomplete CUPTI, or another copy than the one redirected before: left as it is.
        if (!complete || (s.real.register_callbacks && s.real.register_callbacks != real.register_callbacks)) return s.importers;
        s.real = real;
    }
    // Never CUPTI itself (its internal calls) nor the agent (it calls CUPTI through dlsym). With
    // no lock of ours held: the loader's lock is taken inside, and a constructor running under
    // it may call a redirected function.
    std::string cupti_name = cupti_path.substr(cupti_path.rfind('/') + 1);
    GotPatchResult r = redirect_imports(redirects, {cupti_name.empty() ? "libcupti" : cupti_name, "libcupti.so"});
    std::lock_guard lock(s.mutex);
    for (auto& name : r.bound)
        if (std::find(s.importers.begin(), s.importers.end(), name) == s.importers.end()) s.importers.push_back(name);
    return s.importers;
}

void share_cupti_begin(const SessionSide& side) {
    Shared& s = shared();
    std::vector<std::string> importers;
    bool known;
    {
        std::lock_guard lock(s.mutex);
        importers = s.importers;
        known = s.job_registered || s.job_completed;
    }
    auto kineto = known ? std::pair<CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc>{} : kineto_callbacks(importers);
    std::lock_guard lock(s.mutex);
    if (kineto.first && !s.job_completed) s.job_requested = kineto.first, s.job_completed = kineto.second;
    s.side = side;
    s.recording = true;
    s.session_kinds.clear();
    s.buffers_lost = 0, s.all_api = false, s.found_open = s.found_by_kinds = false, s.finalize_waiting = false;
    s.serve_from_job = s.window_open && s.job_completed && s.job_requested;
    if (s.window_open) { // seen opening while the agent was dormant: its API records stay whole
        s.window_from_ns = monotonic_ns();
        if (s.job_kinds.count(CUPTI_ACTIVITY_KIND_RUNTIME) || s.job_kinds.count(CUPTI_ACTIVITY_KIND_DRIVER)) s.all_api = true;
    }
}

bool job_wants_all_api() {
    Shared& s = shared();
    std::lock_guard lock(s.mutex);
    return s.all_api;
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

ShareEnd share_cupti_end(bool foreign_subscriber) {
    Shared& s = shared();
    ShareEnd end;
    After after;
    {
        std::lock_guard lock(s.mutex);
        // A window found open has kinds gtrace never saw switched on: all stay on, for the job to end.
        for (int kind : s.session_kinds)
            if (!s.job_kinds.count(kind) && !(s.window_open && s.found_open)) end.disable.push_back(static_cast<CUpti_ActivityKind>(kind));
        if (s.window_open && s.recording) {
            after.report = true, after.from_ns = s.window_from_ns, after.to_ns = 0;
            after.found_open = s.found_open, after.found_by_kinds = s.found_by_kinds, after.lost = s.buffers_lost, after.side = s.side;
        }
        // CUPTI's finalize forgets every client's callbacks, kinds and subscription: only when the
        // job has none, as far as gtrace can know (a subscriber before it: never).
        end.may_finalize = (s.finalize_waiting || (!s.job_registered && s.job_kinds.empty() && !s.window_open)) &&
                           !s.job_subscribed && !foreign_subscriber;
    }
    after.run();
    return end;
}

void restore_job_callbacks() {
    Shared& s = shared();
    CUpti_BuffersCallbackRequestFunc requested = nullptr;
    CUpti_BuffersCallbackCompleteFunc completed = nullptr;
    {
        std::lock_guard lock(s.mutex);
        s.recording = false; // after the session's last flush: until then the job's buffers went through it
        s.serve_from_job = false;
        s.finalize_waiting = false;
        if ((s.job_registered || s.window_open) && s.job_requested && s.job_completed)
            requested = s.job_requested, completed = s.job_completed;
    }
    if (requested && s.real.register_callbacks) s.real.register_callbacks(requested, completed);
}

void settle_job_window() {
    Shared& s = shared();
    {
        std::lock_guard lock(s.mutex);
        if (!s.recording || s.window_open || !s.serve_from_job) return;
    }
    // Its window closed without the forced flush that hands its last buffers back (a Kineto
    // with none allocated skips it): done here, after which new buffers are gtrace's own.
    s.real.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard lock(s.mutex);
    if (!s.window_open) s.serve_from_job = false;
}

void share_cupti_exiting() { shared().exiting = true; }

bool job_serves_request(uint8_t** buffer, size_t* size, size_t* max_records) {
    Shared& s = shared();
    if (!s.serve_from_job.load(std::memory_order_acquire) || s.exiting.load(std::memory_order_acquire)) return false;
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

void foreign_records_seen() {
    Shared& s = shared();
    std::lock_guard lock(s.mutex);
    if (s.window_open) return;
    // Kinds only the job's profiler switches on, in gtrace's own buffers: its window was open
    // when gtrace started, with no buffer of its own in use then. Its records so far are gtrace's
    // (lost to it); from now on its buffers are its own, and at gtrace's stop its kinds stay on.
    s.window_open = s.found_open = s.found_by_kinds = true;
    s.window_from_ns = monotonic_ns();
    s.serve_from_job = s.recording && s.job_completed && s.job_requested;
    if (s.recording) s.all_api = true;
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
        std::lock_guard lock(s.mutex);
        if (!s.job_buffers.erase(buffer) && !s.window_open) {
            // One the job's window was filling before gtrace started: the window is open.
            s.window_open = s.found_open = true;
            s.window_from_ns = monotonic_ns();
            s.serve_from_job = s.recording && s.job_completed && s.job_requested;
            // Its ids stay whole for it: the flag only (CUPTI is not called from inside its completion).
            if (s.recording) s.all_api = true;
        }
        completed = s.job_completed;
        // Not known, or the process is exiting (the job's profiler may be destroyed already):
        // the buffer is kept — not freed, it is not gtrace's — and counted.
        if (!completed || s.exiting) {
            ++s.buffers_lost;
            return;
        }
    }
    completed(context, stream, buffer, size, valid);
}

} // namespace gtrace::agent
