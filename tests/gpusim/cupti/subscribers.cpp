// Who gets CUPTI's callbacks and records: the first subscriber (the unversioned API's client,
// whose state lives in api.cpp, records.cpp and Buffers::get()) and, in CUPTI 13.3's
// multi-subscriber mode, the others. The mode is an option here (GTSIM_CUPTI_MULTI_SUBSCRIBER=1:
// the process runs CUDA 13.3+ on an r610+ driver); without it a request for several subscribers
// is refused, as CUPTI 13.2 or an older driver refuses it. Rules: gtrace/cupti_multi_subscriber.h.
#include <cstdlib>
#include <cstring>

#include "state.h"

namespace gtsim::cupti {
namespace {

using namespace gtrace::cupti_v2;

// A subscriber after the first: its own callbacks, buffers and kinds.
struct Other {
    Subscriber sub;
    Buffers* buffers = nullptr;
    std::atomic<bool> kinds[CUPTI_ACTIVITY_KIND_COUNT] = {};
};
Other g_others[kMaxOtherSubscribers];
std::mutex g_subscribe_mu;
std::atomic<uint8_t> g_state{kNotSet};
std::atomic<bool> g_v1_used{false}, g_v2_used{false};
std::atomic<int> g_others_active{0}; // the hot paths look no further while it is 0

bool option_on() {
    const char* v = getenv("GTSIM_CUPTI_MULTI_SUBSCRIBER");
    return v && strcmp(v, "1") == 0;
}

bool has_kind(const Other& o, CUpti_ActivityKind kind) {
    return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT && o.kinds[kind].load();
}

CUpti_SubscriberHandle handle_of(Subscriber& s) { return reinterpret_cast<CUpti_SubscriberHandle>(&s); }

Other* other_of(CUpti_SubscriberHandle h) {
    for (Other& o : g_others)
        if (h == handle_of(o.sub) && o.sub.active.load()) return &o;
    return nullptr;
}

} // namespace

Subscriber* subscriber_of(CUpti_SubscriberHandle h) {
    if (h == handle_of(subscriber())) return subscriber().active.load() ? &subscriber() : nullptr;
    for (Other& o : g_others)
        if (h == handle_of(o.sub)) return o.sub.active.load() ? &o.sub : nullptr;
    return nullptr;
}

// The usage guide: "When both V1 and V2 APIs are present in the same process, CUPTI returns the
// error CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED". Read strictly: whichever family is used
// first (successfully) is the process's, queries included — so that the suite fails if gtrace
// ever makes a subscriber-scoped call in a process whose profiler uses the unversioned API.
CUptiResult v1_call() {
    if (g_state.load() == kMultiple || g_v2_used.load()) return ret(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    g_v1_used.store(true);
    return CUPTI_SUCCESS;
}

CUptiResult v2_call() {
    if (g_v1_used.load()) return ret(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    g_v2_used.store(true);
    return CUPTI_SUCCESS;
}

uint8_t multiple_subscriber_state() { return g_state.load(); }

CUptiResult subscribe(CUpti_SubscriberHandle* out, CUpti_CallbackFunc fn, void* user, const void* params_in, bool v2) {
    attach();
    auto* params = static_cast<const SubscriberParams*>(params_in);
    if (!out) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (params && params->structSize < CUpti_SubscriberParams_STRUCT_SIZE) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    bool multiple = params && params->structSize >= kAllowMultipleEnd && params->allowMultipleSubscribers == 1;
    std::lock_guard lk(g_subscribe_mu);
    auto refuse = [&](const char* holder) {
        if (params && params->oldSubscriberName && params->oldSubscriberSize > 0)
            snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", holder);
        return ret(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    };
    if (!v2 && (g_state.load() == kMultiple || g_v2_used.load())) return refuse("CUPTI for gpusim client (V2 API)");
    if (v2 && g_v1_used.load()) return refuse("CUPTI for gpusim client (V1 API)");
    if (multiple) {
        // Not this CUDA/driver; the unversioned API used already; or the first chose one subscriber.
        if (!option_on() || g_v1_used.load() || g_state.load() == kSingle) return refuse("CUPTI for gpusim client");
        g_state.store(kMultiple);
        g_v2_used.store(true);
        if (!subscriber().active.load() && !foreign_subscriber()) return take_subscriber(subscriber(), out, fn, user) ? CUPTI_SUCCESS : refuse("?");
        for (Other& o : g_others) {
            if (o.sub.active.load()) continue;
            for (auto& k : o.kinds) k.store(false);
            if (!o.buffers) o.buffers = Buffers::create();
            take_subscriber(o.sub, out, fn, user);
            ++g_others_active;
            return CUPTI_SUCCESS;
        }
        return ret(CUPTI_ERROR_MAX_LIMIT_REACHED);
    }
    if (g_state.load() == kMultiple) return refuse("CUPTI for gpusim client (multiple subscribers)");
    if (foreign_subscriber() || subscriber().active.load())
        return refuse(foreign_subscriber() ? "gpusim foreign subscriber" : "CUPTI for gpusim client");
    (v2 ? g_v2_used : g_v1_used).store(true);
    g_state.store(kSingle);
    take_subscriber(subscriber(), out, fn, user);
    return CUPTI_SUCCESS;
}

bool unsubscribe_other(CUpti_SubscriberHandle h) {
    Other* o = other_of(h);
    if (!o) return false;
    {
        std::lock_guard lk(o->sub.mu);
        o->sub.active.store(false);
        o->sub.fn = nullptr, o->sub.user = nullptr;
    }
    --g_others_active;
    for (auto& k : o->kinds) k.store(false);
    o->buffers->detach(); // every buffer handed back
    return true;
}

int active_subscribers() {
    int n = subscriber().active.load() ? 1 : 0;
    for (Other& o : g_others) n += o.sub.active.load();
    return n;
}

bool others_want(CUpti_ActivityKind kind) {
    if (!g_others_active.load()) return false;
    for (Other& o : g_others)
        if (o.sub.active.load() && has_kind(o, kind)) return true;
    return false;
}

bool set_other_kind(CUpti_SubscriberHandle h, CUpti_ActivityKind kind, bool on) {
    Other* o = other_of(h);
    if (!o) return false;
    o->kinds[kind].store(on);
    return true;
}

bool register_other_callbacks(CUpti_SubscriberHandle h, CUpti_BuffersCallbackRequestFunc_v2 req,
                              CUpti_BuffersCallbackCompleteFunc_v2 done) {
    Other* o = other_of(h);
    if (!o) return false;
    o->buffers->set_callbacks_v2(req, done);
    return true;
}

void flush_others(bool forced) {
    for (Other& o : g_others)
        if (o.sub.active.load() && o.buffers) o.buffers->flush(forced);
}

void emit(const void* record, size_t size, uint64_t complete_at, bool to_first) {
    CUpti_ActivityKind kind = static_cast<const CUpti_Activity*>(record)->kind;
    if (to_first && kind_enabled(kind)) Buffers::get().append(record, size, complete_at);
    if (!g_others_active.load()) return;
    for (Other& o : g_others)
        if (o.sub.active.load() && has_kind(o, kind)) o.buffers->append(record, size, complete_at);
}

void emit_api(const CUpti_ActivityAPI& api, const CUpti_ActivityExternalCorrelation* ext, size_t n, bool to_first) {
    if (to_first) {
        if (kind_enabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION))
            for (size_t i = 0; i < n; ++i) Buffers::get().append(&ext[i], sizeof ext[i], 0);
        Buffers::get().append(&api, sizeof api, 0);
    }
    if (!g_others_active.load()) return;
    for (Other& o : g_others) {
        if (!o.sub.active.load() || !has_kind(o, api.kind)) continue;
        if (has_kind(o, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION))
            for (size_t i = 0; i < n; ++i) o.buffers->append(&ext[i], sizeof ext[i], 0);
        o.buffers->append(&api, sizeof api, 0);
    }
}

void emit_kernel(CUpti_ActivityKernel10 r, uint64_t complete_at) {
    for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL})
        if (kind_enabled(kind)) {
            r.kind = kind;
            Buffers::get().append(&r, sizeof r, complete_at);
            break;
        }
    if (!g_others_active.load()) return;
    for (Other& o : g_others) {
        if (!o.sub.active.load()) continue;
        r.kind = has_kind(o, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                                                                    : CUPTI_ACTIVITY_KIND_KERNEL;
        if (has_kind(o, r.kind)) o.buffers->append(&r, sizeof r, complete_at);
    }
}

bool any_other() { return g_others_active.load() > 0; }

void for_each_other(const std::function<void(Subscriber&, int)>& fn) {
    for (int i = 0; i < kMaxOtherSubscribers; ++i)
        if (g_others[i].sub.active.load()) fn(g_others[i].sub, i);
}

} // namespace gtsim::cupti
