// libgtrace_agent.so: loaded into a traced process by gtrace (a borrowed thread's dlopen) or by
// CUDA at initialization (CUDA_INJECTION64_PATH → InitializeInjection, launch mode). It runs
// CUPTI and ships GPU records to gtrace through a ring in a sealed memfd, and never blocks the
// application. It obeys only requests written into its own memory (the mailbox, see
// gtrace/agent.h), opens no file and follows no path: a local user who cannot ptrace the process
// cannot reach it. Its own thread flushes, watches its owner through a pipe, detaches on request
// or as soon as gtrace is gone, and then stays dormant, reading its mailbox ten times a second.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "collect/agent/call_capture.h"
#include "foundation/test_hooks.h"
#include "collect/agent/cupti_session.h"
#include "collect/agent/job_profiler.h"
#include "collect/agent/memory_state.h"
#include "collect/agent/nvtx_injection.h"
#include "collect/agent/nvtx_tables.h"
#include "collect/agent/offer.h"
#include "collect/agent/self_time.h"

namespace gtrace::agent {
namespace {

constexpr int kWatchMs = 200;          // how often the control thread wakes in a session
constexpr int kFlushEveryMs = 500;     // records reach gtrace within about this
constexpr int kClockEveryMs = 5000;    // re-measure the clock offset
constexpr int kAdoptTimeoutMs = 10000; // an offer nobody takes is withdrawn
constexpr int kAdoptPollMs = 2;        // attach mode: how often the offer is looked at until taken
constexpr int kRequestGraceMs = 100;   //   and how long its request for the calls is awaited then
constexpr int kQuickPollMs = 10;       // mailbox reads just after loading or a session: a new
constexpr int kQuickPollFor = 300;     //   gtrace is expected (300 × 10 ms), then
constexpr int kDormantPollMs = 100;    //   a read every 100 ms: one memory load, nothing else

struct Config {
    std::string owner; // the gtrace the offer is for
    uint64_t ring_bytes = GT_AGENT_DEFAULT_RING;
    SessionConfig session;
    std::vector<uint64_t> nvtx_tables; // attach mode: modules' nvtxGlobals_v3 to serve (nvtx_tables.h)
    bool await_calls = false;          // launch mode: gtrace will ask for the calls (await_call_request)
};

// Calls `item` with each non-empty part of a ':'-separated list.
template <typename Item>
void for_each_listed(const std::string& list, Item&& item) {
    for (size_t p = 0; p <= list.size();) {
        size_t colon = list.find(':', p);
        if (colon == std::string::npos) colon = list.size();
        if (colon > p) item(list.substr(p, colon - p));
        p = colon + 1;
    }
}

// Parses "owner=TOKEN;ring=BYTES;callbacks=0|1;cupti=PATH:PATH;nvtx=HEX:HEX;await_calls=0|1".
// Empty error: valid.
std::string parse(const std::string& s, Config& c) {
    for (size_t pos = 0; pos <= s.size();) {
        size_t end = s.find(';', pos);
        if (end == std::string::npos) end = s.size();
        std::string item = s.substr(pos, end - pos);
        pos = end + 1;
        size_t eq = item.find('=');
        if (item.empty()) continue;
        if (eq == std::string::npos) return "malformed item '" + item + "'";
        std::string key = item.substr(0, eq), value = item.substr(eq + 1);
        if (key == "owner") c.owner = value;
        else if (key == "ring") c.ring_bytes = strtoull(value.c_str(), nullptr, 10);
        else if (key == "callbacks") c.session.callbacks = value != "0";
        else if (key == "cupti") for_each_listed(value, [&](std::string path) { c.session.cupti_candidates.push_back(std::move(path)); });
        else if (key == "nvtx") for_each_listed(value, [&](const std::string& hex) { c.nvtx_tables.push_back(strtoull(hex.c_str(), nullptr, 16)); });
        else if (key == "await_calls") c.await_calls = value != "0";
        else {
            return "unknown key '" + key + "'";
        }
    }
    if (c.owner.empty() || c.owner.size() >= GT_OWNER_TOKEN_MAX) return "no valid owner";
    if (c.ring_bytes < GT_AGENT_MIN_RING || c.ring_bytes > GT_AGENT_MAX_RING || (c.ring_bytes & (c.ring_bytes - 1)))
        return "ring size out of range";
    return {};
}

struct Agent {
    std::mutex mutex;
    bool active = false; // a session exists (offered, owned, or failed and waiting to be read)
    bool thread_started = false;
    Config config;
    Offer offer;
    uint32_t sessions = 0;
    uint64_t last_request = 0;
    int quick_polls = kQuickPollFor;
};

// Constructed on first use (the load-time constructor below may run before this file's static
// initializers would) and never destroyed: at exit the agent's thread and CUPTI's last buffer
// completions still use the ring while static destructors run.
Agent& the_agent() {
    static Agent* a = new Agent;
    return *a;
}

// Starts CUPTI; on failure leaves the reason in the ring for gtrace (under the mutex).
void begin_session(Agent& a) {
    std::string error = start_session(a.offer.ring(), a.config.session);
    flush_pending_nvtx(); // launch mode: the ranges that ended before CUDA started the agent
    if (error.empty()) {
        __atomic_store_n(&a.offer.ring()->state, GT_AGENT_ACTIVE, __ATOMIC_RELEASE);
        return;
    }
    snprintf(a.offer.ring()->message, sizeof a.offer.ring()->message, "%s", error.c_str());
    __atomic_store_n(&a.offer.ring()->state, GT_AGENT_FAILED, __ATOMIC_RELEASE);
}

// gtrace asked for the calls: from CUPTI's API records where it asked so and CUPTI can, else
// from the callbacks. GTRACE_TEST_AGENT_RECORDS_GAP_MS (in the traced process's environment)
// stretches the time between the records going on and the agent's `since`, as a descheduled
// agent thread would: the calls in between must still be in the trace once.
void begin_records_or_callbacks(gt_agent_ring* ring, uint32_t source) {
    const bool with_stacks = ring->py_stack_every != 0;
    const bool from_records = source == GT_CALLS_FROM_RECORDS && start_call_records(with_stacks);
    if (const char* gap = from_records ? GTRACE_TEST_HOOK_IN_TARGET("AGENT_RECORDS_GAP_MS") : nullptr)
        usleep(static_cast<useconds_t>(atoi(gap)) * 1000);
    begin_call_capture(ring, from_records);
    if (from_records) end_unneeded_callbacks(with_stacks);
}

// Once gtrace asked for the calls: begin recording them (once, whichever thread sees it first).
// False while gtrace has not asked.
bool begin_requested_calls(Agent& a, gt_agent_ring* ring) {
    uint32_t source = __atomic_load_n(&ring->capture_calls, __ATOMIC_ACQUIRE);
    if (!source) return false;
    std::lock_guard lock(a.mutex);
    if ((ring->flags & GT_AGENT_CALLBACKS) && !(ring->flags & GT_AGENT_CALLS)) begin_records_or_callbacks(ring, source);
    return true;
}

// How long an offer waits to be taken. GTRACE_TEST_AGENT_ADOPT_TIMEOUT_MS (the traced process's
// environment): shorter, so that a test sees an offer withdrawn from a gtrace slower than that.
int adopt_timeout_ms() {
    static const int ms = [] {
        auto v = gtrace::test_hook_number(GTRACE_TEST_HOOK_IN_TARGET("AGENT_ADOPT_TIMEOUT_MS"));
        return v ? static_cast<int>(*v) : kAdoptTimeoutMs;
    }();
    return ms;
}

// Runs one session until gtrace asks to detach, goes away, or never takes the offer.
void serve(Agent& a) {
    // Attach mode: the session begins once gtrace has taken the ring, having asked in it for the
    // calls already (capture_calls): the calls are then recorded here from CUPTI's first GPU
    // record on, and every op has its call, whether or not the uprobes were on then (off while
    // every traced process records its own, they come back for a new CUDA process only once
    // gtrace has seen it). Before, the session began at once and the calls a watch (200 ms) later.
    int waited = 0;
    if (a.offer.ring()->state == GT_AGENT_STARTING && (a.offer.ring()->flags & GT_AGENT_LATE_ATTACH))
        for (; waited < adopt_timeout_ms() && !a.offer.taken(); waited += kAdoptPollMs) usleep(kAdoptPollMs * 1000);
    {
        std::lock_guard lock(a.mutex);
        if (a.offer.ring()->state == GT_AGENT_STARTING && a.offer.taken()) begin_session(a);
    }
    // gtrace writes its request just after taking the ring; an older gtrace asks later (the watch).
    if (a.offer.ring()->state == GT_AGENT_ACTIVE && (a.offer.ring()->flags & GT_AGENT_LATE_ATTACH))
        for (int w = 0; w < kRequestGraceMs && !begin_requested_calls(a, a.offer.ring()); ++w) usleep(1000);
    // In a running process the memory in use now starts gtrace's memory curves (launch mode
    // starts with CUDA: nothing allocated yet). After CUPTI's memory records went on, so
    // that no allocation falls between the two; gtrace skips records older than the figures.
    if (a.offer.ring()->state == GT_AGENT_ACTIVE && (a.offer.ring()->flags & GT_AGENT_LATE_ATTACH)) send_memory_states();
    gt_agent_ring* ring = a.offer.ring();
    // On the agent's own thread, never the application's: a module's first NVTX call that
    // races with this waits in NVTX's own initialization, as it would for any tool.
    if (ring->state == GT_AGENT_ACTIVE) install_nvtx_tables(ring, a.config.nvtx_tables);
    bool taken = false;
    int since_flush = 0, since_clock = 0;
    for (;;) {
        if (!taken && (taken = a.offer.taken())) publish_owned();
        if (!taken && waited >= adopt_timeout_ms()) break;
        if (a.offer.owner_gone(kWatchMs)) break;
        waited += kWatchMs;
        publish_self_time(ring);
        if (__atomic_load_n(&ring->control, __ATOMIC_ACQUIRE) == GT_AGENT_DETACH) break;
        if (ring->state != GT_AGENT_ACTIVE) continue;
        if (!(ring->flags & GT_AGENT_CALLS)) begin_requested_calls(a, ring);
        settle_job_window(); // a job's profiler window that closed without handing its last buffers back
        if ((since_flush += kWatchMs) >= kFlushEveryMs) {
            since_flush = 0;
            flush_session(false);
        }
        if ((since_clock += kWatchMs) >= kClockEveryMs) {
            since_clock = 0;
            measure_clock();
        }
    }
    bool was_active = ring->state == GT_AGENT_ACTIVE;
    if (was_active) stop_session();
    publish_self_time(ring); // the callbacks of the session's last moments counted too
    std::lock_guard lock(a.mutex);
    __atomic_store_n(&ring->state, was_active ? uint32_t{GT_AGENT_DETACHED} : ring->state, __ATOMIC_RELEASE);
    a.offer.close_all();
    publish_idle();
    a.active = false;
    a.quick_polls = kQuickPollFor; // a re-attach usually follows soon
}

// Answers a request (seq > 0) or the launch-mode config (seq 0). 0: offered; negative: refused.
int start(const std::string& config_text, uint64_t seq, bool from_injection) {
    Agent& a = the_agent();
    std::lock_guard lock(a.mutex);
    Config c;
    if (std::string why = parse(config_text, c); !why.empty()) {
        fprintf(stderr, "gtrace agent (pid %d): refused a request: %s\n", getpid(), why.c_str());
        publish_refusal(seq, "refused: " + why);
        return -EINVAL;
    }
    if (a.active) { // owned by another capture: the mailbox keeps naming it
        publish_busy(seq);
        return -EBUSY;
    }
    Offer offer = Offer::create(c.ring_bytes);
    if (!offer) {
        int err = errno;
        publish_refusal(seq, std::string("cannot create the ring: ") + strerror(err));
        return -err;
    }
    a.config = c;
    a.offer = std::move(offer);
    if (!from_injection) __atomic_or_fetch(&a.offer.ring()->flags, GT_AGENT_LATE_ATTACH, __ATOMIC_RELEASE);
    a.active = true;
    // At CUDA initialization CUPTI must be on before the first kernel: start it here. In a
    // running process the agent's thread starts it (serve), never the application's threads.
    if (from_injection) begin_session(a);
    a.offer.publish(c.owner, seq, ++a.sessions);
    return 0;
}

// Launch mode, inside CUDA's initialization (the application's first CUDA call waits on it):
// wait until gtrace asks for the calls, at most kAwaitCallsMs, and begin recording them here —
// before that first call. A gtrace slow to ask (a busy host) would otherwise miss the calls of a
// program that is done soon after loading CUDA: its uprobes may not be on yet either.
constexpr int kAwaitCallsMs = 3000;

void await_call_request() {
    Agent& a = the_agent();
    gt_agent_ring* ring = nullptr;
    {
        std::lock_guard lock(a.mutex);
        if (!a.active || !a.config.await_calls) return;
        ring = a.offer.ring();
    }
    if (ring->state != GT_AGENT_ACTIVE || !(ring->flags & GT_AGENT_CALLBACKS)) return;
    for (int waited = 0; waited < kAwaitCallsMs; ++waited) {
        if (begin_requested_calls(a, ring) || __atomic_load_n(&ring->control, __ATOMIC_ACQUIRE) == GT_AGENT_DETACH) return;
        usleep(1000);
    }
}

void* agent_loop(void*) {
    Agent& a = the_agent();
    for (;;) {
        bool active;
        {
            std::lock_guard lock(a.mutex);
            active = a.active;
        }
        if (active) {
            serve(a);
            continue;
        }
        usleep((a.quick_polls > 0 ? kQuickPollMs : kDormantPollMs) * 1000);
        if (a.quick_polls > 0) --a.quick_polls;
        Request r = take_request(a.last_request);
        if (r.seq == 0) continue;
        a.last_request = r.seq;
        // GTRACE_TEST_AGENT_ANSWER_DELAY_MS (the traced process's environment): answer late, as
        // an agent whose process is descheduled on a busy host.
        if (auto delay = gtrace::test_hook_number(GTRACE_TEST_HOOK_IN_TARGET("AGENT_ANSWER_DELAY_MS"))) usleep(*delay * 1000);
        start(r.config, r.seq, false);
    }
    return nullptr;
}

void ensure_thread(Agent& a) {
    if (a.thread_started) return;
    sigset_t all, old;
    sigfillset(&all); // the agent's thread must not take the application's signals
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    if (pthread_create(&thread, nullptr, agent_loop, nullptr) == 0) {
        pthread_detach(thread);
        pthread_setname_np(thread, "gtrace-agent");
        a.thread_started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void in_forked_child() {
    Agent& a = the_agent();
    forget_ring_in_child();
    forget_nvtx_in_child();
    a.offer.forget_in_child();
    a.thread_started = false; // the agent's thread was not copied
    a.active = false;
    a.last_request = __atomic_load_n(&gtrace_agent_mailbox.request_seq, __ATOMIC_ACQUIRE); // the parent's
}

__attribute__((constructor)) void on_load() {
    pthread_atfork(nullptr, nullptr, in_forked_child);
    std::lock_guard lock(the_agent().mutex);
    ensure_thread(the_agent());
}

// At exit the records still in CUPTI's buffers would die with the process: hand them over. A
// ring not yet taken (a launched process that ends right after CUDA started) dies with the
// process unless gtrace takes it: give gtrace a moment (it looks every 50 ms).
__attribute__((destructor)) void flush_at_exit() {
    constexpr int kExitWaitMs = 2000; // gtrace rescans every process at least once a second
    share_cupti_exiting(); // the job's profiler may be destroyed already: nothing goes back to it
    Agent& a = the_agent();
    std::lock_guard lock(a.mutex);
    if (!a.active || !a.offer || a.offer.ring()->state != GT_AGENT_ACTIVE) return;
    for (int waited = 0; !__atomic_load_n(&a.offer.ring()->owner_pid, __ATOMIC_ACQUIRE) && waited < kExitWaitMs; waited += 10)
        usleep(10000);
    flush_session(true);
}

} // namespace
} // namespace gtrace::agent

extern "C" {

// Called by CUDA at initialization when CUDA_INJECTION64_PATH names this library.
__attribute__((visibility("default"))) int InitializeInjection(void) {
    const char* config = getenv(GT_AGENT_ENV_CONFIG);
    if (!config) return 1;
    int rc = gtrace::agent::start(config, 0, true);
    if (rc < 0) fprintf(stderr, "gtrace agent: could not start in pid %d (%s)\n", getpid(), strerror(-rc));
    else gtrace::agent::await_call_request();
    return 1; // CUDA goes on whatever happened here
}
}
