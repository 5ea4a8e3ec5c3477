// The CUPTI library the session uses, the CUDA driver it needs, and CUPTI's clock.
#include <dlfcn.h>
#include <time.h>

#include <cstdio>

#include "collect/agent/cupti_session.h"
#include "collect/agent/session_state.h"

namespace gtrace::agent {

Session& the_session() {
    static Session* s = new Session;
    return *s;
}

std::string result_text(CUptiResult r) {
    const char* text = nullptr;
    if (the_session().cupti.cuptiGetResultString && the_session().cupti.cuptiGetResultString(r, &text) == CUPTI_SUCCESS && text)
        return text;
    return "CUPTI error " + std::to_string(static_cast<int>(r));
}

std::string load_cupti(const std::vector<std::string>& candidates) {
    std::string tried;
    for (const auto& path : candidates) {
        void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            tried += (tried.empty() ? "" : "; ") + path + ": " + dlerror();
            continue;
        }
        Cupti c;
        c.handle = h;
        bool complete = true;
#define GT_CUPTI_RESOLVE(name)                                                       \
    c.name = reinterpret_cast<decltype(c.name)>(dlsym(h, #name));                    \
    if (!c.name) {                                                                   \
        tried += (tried.empty() ? "" : "; ") + path + ": no symbol " #name;          \
        complete = false;                                                            \
    }
        GT_CUPTI_FUNCTIONS(GT_CUPTI_RESOLVE)
#undef GT_CUPTI_RESOLVE
        if (!complete) continue; // left loaded: unloading a CUPTI that initialized is unsafe
#define GT_CUPTI_RESOLVE_OPTIONAL(name) c.name = reinterpret_cast<decltype(c.name)>(dlsym(h, #name));
        GT_CUPTI_OPTIONAL_FUNCTIONS(GT_CUPTI_RESOLVE_OPTIONAL)
#undef GT_CUPTI_RESOLVE_OPTIONAL
        the_session().cupti = c;
        return {};
    }
    return "no usable libcupti (tried " + (tried.empty() ? std::string("nothing") : tried) + ")";
}

bool multiple_subscribers_on(const Cupti& c) {
    if (!c.cuptiSubscribe_v2 || !c.cuptiActivityEnable_v2 || !c.cuptiActivityDisable_v2 ||
        !c.cuptiActivityRegisterCallbacks_v2 || !c.cuptiActivityGetAttribute_v2)
        return false;
    uint8_t state = cupti_v2::kNotSet;
    size_t size = sizeof state;
    auto attr = static_cast<CUpti_ActivityAttribute>(cupti_v2::kAttrMultipleSubscriberState);
    return c.cuptiActivityGetAttribute_v2(nullptr, attr, &size, &state) == CUPTI_SUCCESS && state == cupti_v2::kMultiple;
}

void set_message(gt_agent_ring* ring, const std::string& text) {
    snprintf(ring->message, sizeof ring->message, "%s", text.c_str());
}

// The CUDA driver, loaded — already (CUDA initialized; by its soname, whatever its file is
// called) or now, as CUPTI would load it itself — and a working one: its version answered
// (cuDriverGetVersion needs no cuInit). The toolkit's stub libcuda answers
// CUDA_ERROR_STUB_LIBRARY. Empty when usable, else why not.
std::string driver_unusable() {
    void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL); // kept: CUPTI needs it from now on
    if (!h) return "no CUDA driver in this process or on this host (libcuda.so.1 cannot be loaded)";
    using DriverGetVersion = int (*)(int*);
    auto get_version = reinterpret_cast<DriverGetVersion>(dlsym(h, "cuDriverGetVersion"));
    int version = 0, rc = get_version ? get_version(&version) : -1;
    if (rc != 0 || version <= 0)
        return rc == 34 ? "the CUDA driver in this process is the toolkit's stub (CUDA_ERROR_STUB_LIBRARY), not a driver"
                        : "the CUDA driver does not answer cuDriverGetVersion (error " + std::to_string(rc) + ")";
    return {};
}

void measure_clock() {
    Session& s = the_session();
    if (!s.ring || !s.cupti.cuptiGetTimestamp) return;
    uint64_t best_width = UINT64_MAX;
    int64_t best_offset = 0;
    for (int i = 0; i < 64; ++i) {
        timespec a{}, b{};
        uint64_t cupti_ts = 0;
        clock_gettime(CLOCK_MONOTONIC, &a);
        s.cupti.cuptiGetTimestamp(&cupti_ts);
        clock_gettime(CLOCK_MONOTONIC, &b);
        uint64_t ta = a.tv_sec * 1000000000ull + a.tv_nsec, tb = b.tv_sec * 1000000000ull + b.tv_nsec;
        if (tb - ta < best_width) {
            best_width = tb - ta;
            best_offset = static_cast<int64_t>(cupti_ts) - static_cast<int64_t>(ta + (tb - ta) / 2);
        }
    }
    s.ring->clock_error_ns = best_width / 2;
    __atomic_store_n(&s.ring->clock_offset_ns, best_offset, __ATOMIC_RELEASE);
}

} // namespace gtrace::agent
