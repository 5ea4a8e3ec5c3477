#include "collect/agent/nvtx_injection.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#define NVTX_NO_IMPL // the types and callback ids only: the agent implements the API
#include <nvtx3/nvToolsExt.h>

#include "collect/agent/call_capture.h"
#include "collect/agent/cupti_session.h"
#include "collect/agent_ring.h"
#include "gtrace/agent.h"

namespace gtrace::agent {
namespace {

// Domains and registered strings are handed out as small integers cast to handles, never as
// pointers: a handle the agent did not make (one created before attach is null, the default
// domain) is recognized without being dereferenced.
template <size_t N>
class Registry {
public:
    uintptr_t add(std::string text) {
        std::lock_guard lock(mutex_);
        size_t n = count_.load(std::memory_order_relaxed);
        if (n == N) return 0; // full: a null handle, as NVTX without a tool gives
        names_[n] = new std::string(std::move(text)); // never freed: handles live as long as the process
        count_.store(n + 1, std::memory_order_release);
        return n + 1;
    }
    const std::string* find(uintptr_t handle) const {
        return handle && handle <= count_.load(std::memory_order_acquire) ? names_[handle - 1] : nullptr;
    }

private:
    std::mutex mutex_;
    std::atomic<size_t> count_{0};
    std::array<const std::string*, N> names_{};
};
Registry<4096> g_domains;
Registry<65536> g_strings;

uint32_t current_tid() {
    thread_local uint32_t tid = static_cast<uint32_t>(gettid());
    return tid;
}

std::string narrow(const wchar_t* w) { // UTF-8 of a wide string (UTF-32 on Linux), cut at the maximum
    std::string out;
    for (; w && *w && out.size() < GT_NVTX_MESSAGE_MAX; ++w) {
        uint32_t c = static_cast<uint32_t>(*w);
        if (c < 0x80) out += static_cast<char>(c);
        else if (c < 0x800) out += {static_cast<char>(0xc0 | c >> 6), static_cast<char>(0x80 | (c & 0x3f))};
        else if (c < 0x10000) out += {static_cast<char>(0xe0 | c >> 12), static_cast<char>(0x80 | (c >> 6 & 0x3f)), static_cast<char>(0x80 | (c & 0x3f))};
        else if (c < 0x110000)
            out += {static_cast<char>(0xf0 | c >> 18), static_cast<char>(0x80 | (c >> 12 & 0x3f)),
                    static_cast<char>(0x80 | (c >> 6 & 0x3f)), static_cast<char>(0x80 | (c & 0x3f))};
    }
    return out;
}

std::string ascii(const char* s) { return s ? std::string(s, strnlen(s, GT_NVTX_MESSAGE_MAX)) : std::string(); }

// A range from its opening to its end.
struct Open {
    uintptr_t domain = 0; // 0: the default domain
    uint64_t start = 0, payload = 0;
    uint32_t tid = 0, category = 0;
    uint8_t payload_type = 0;
    std::string message;
};

Open open_range(uintptr_t domain, const nvtxEventAttributes_t* a) {
    Open o{domain, 0, 0, current_tid(), 0, 0, {}};
    constexpr size_t kNeeded = offsetof(nvtxEventAttributes_t, message) + sizeof(a->message);
    if (a && a->size >= kNeeded) {
        o.category = a->category;
        if (a->payloadType >= NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 && a->payloadType <= NVTX_PAYLOAD_TYPE_FLOAT) {
            o.payload_type = static_cast<uint8_t>(a->payloadType);
            static_assert(sizeof(a->payload) == sizeof(o.payload));
            std::memcpy(&o.payload, &a->payload, sizeof o.payload);
        }
        if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) o.message = ascii(a->message.ascii);
        else if (a->messageType == NVTX_MESSAGE_TYPE_UNICODE) o.message = narrow(a->message.unicode);
        else if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
            const std::string* s = g_strings.find(reinterpret_cast<uintptr_t>(a->message.registered));
            o.message = s ? *s : std::string("(registered string)");
        }
    }
    o.start = monotonic_ns(); // last: the range's own time, not the agent's
    return o;
}

// Ranges that ended before the first session's ring (launch mode), under the ring's lock.
struct Ended {
    Open range;
    uint64_t end;
    uint32_t end_tid;
    uint8_t kind;
    uint16_t depth;
};
constexpr size_t kMaxPending = 4096;
std::vector<Ended>* g_pending = nullptr; // null: nothing is kept

void write_range(gt_agent_ring* ring, const Ended& e) {
    const std::string* domain = g_domains.find(e.range.domain);
    size_t domain_len = domain ? std::min<size_t>(domain->size(), GT_NVTX_DOMAIN_MAX) : 0;
    size_t message_len = std::min<size_t>(e.range.message.size(), GT_NVTX_MESSAGE_MAX);
    uint64_t pos = 0;
    auto* r = agent_ring_reserve_record<gt_nvtx_range>(ring, sizeof(gt_nvtx_range) + domain_len + message_len,
                                                       GT_GPU_NVTX_RANGE, 0, &pos);
    if (!r) return; // counted as a drop
    r->start = e.range.start;
    r->end = e.end;
    r->payload = e.range.payload;
    r->tid = e.range.tid;
    r->end_tid = e.end_tid;
    r->category = e.range.category;
    r->payload_type = e.range.payload_type;
    r->kind = e.kind;
    r->depth = e.depth;
    r->domain_len = static_cast<uint16_t>(domain_len);
    r->message_len = static_cast<uint16_t>(message_len);
    if (domain_len) std::memcpy(r->text, domain->data(), domain_len);
    std::memcpy(r->text + domain_len, e.range.message.data(), message_len);
    agent_ring_commit(ring, pos, r->h.size);
}

void range_ended(Open&& range, uint8_t kind, uint16_t depth) {
    Ended e{std::move(range), monotonic_ns(), current_tid(), kind, depth};
    std::lock_guard lock(session_ring_mutex());
    if (gt_agent_ring* ring = session_ring()) write_range(ring, e);
    else if (g_pending && g_pending->size() < kMaxPending) g_pending->push_back(std::move(e));
}

// Push/pop ranges nest per thread and per domain.
constexpr size_t kMaxOpenPerThread = 1024;
struct ThreadRanges {
    std::vector<Open> open;
    size_t untracked = 0; // pushed past kMaxOpenPerThread: counted, not recorded
};
thread_local ThreadRanges t_ranges;

int depth_in(uintptr_t domain) {
    int depth = 0;
    for (const Open& o : t_ranges.open) depth += o.domain == domain;
    return depth;
}

int push(Open&& o) {
    int level = depth_in(o.domain);
    if (t_ranges.open.size() >= kMaxOpenPerThread) return level + static_cast<int>(++t_ranges.untracked) - 1;
    t_ranges.open.push_back(std::move(o));
    return level;
}

int pop(uintptr_t domain) {
    if (t_ranges.untracked) return static_cast<int>(kMaxOpenPerThread + --t_ranges.untracked);
    for (size_t i = t_ranges.open.size(); i-- > 0;) {
        if (t_ranges.open[i].domain != domain) continue;
        Open o = std::move(t_ranges.open[i]);
        t_ranges.open.erase(t_ranges.open.begin() + static_cast<ptrdiff_t>(i));
        int level = depth_in(domain);
        range_ended(std::move(o), GT_NVTX_PUSH_POP, static_cast<uint16_t>(level));
        return level;
    }
    return -1; // no range of that domain is open here (pushed before the agent came in)
}

// Start/end ranges may end on another thread: kept by id. Never destroyed: application threads
// may end ranges while static destructors run at exit.
constexpr size_t kMaxStarted = 65536;
struct Started {
    std::mutex mutex;
    std::unordered_map<uint64_t, Open> by_id;
    std::atomic<uint64_t> next_id{1};
};
Started& started() {
    static Started* s = new Started;
    return *s;
}

nvtxRangeId_t start(Open&& o) {
    Started& s = started();
    uint64_t id = s.next_id.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(s.mutex);
    if (s.by_id.size() < kMaxStarted) s.by_id.emplace(id, std::move(o));
    return id;
}

void end(nvtxRangeId_t id) {
    Started& s = started();
    Open o;
    {
        std::lock_guard lock(s.mutex);
        auto it = s.by_id.find(id);
        if (it == s.by_id.end()) return; // started before the agent came in, or past the bound
        o = std::move(it->second);
        s.by_id.erase(it);
    }
    range_ended(std::move(o), GT_NVTX_START_END, 0);
}

uintptr_t domain_of(nvtxDomainHandle_t d) { return g_domains.find(reinterpret_cast<uintptr_t>(d)) ? reinterpret_cast<uintptr_t>(d) : 0; }

// The API, as NVTX calls it through a module's slots.
// A range of the default domain named by a bare message (the A and W entry points).
Open with_message(std::string message) {
    Open o = open_range(0, nullptr);
    o.message = std::move(message);
    return o;
}

nvtxRangeId_t range_start_ex(const nvtxEventAttributes_t* a) { return start(open_range(0, a)); }
nvtxRangeId_t range_start_a(const char* m) { return start(with_message(ascii(m))); }
nvtxRangeId_t range_start_w(const wchar_t* m) { return start(with_message(narrow(m))); }
void range_end(nvtxRangeId_t id) { end(id); }
int range_push_ex(const nvtxEventAttributes_t* a) { return push(open_range(0, a)); }
int range_push_a(const char* m) { return push(with_message(ascii(m))); }
int range_push_w(const wchar_t* m) { return push(with_message(narrow(m))); }
int range_pop() { return pop(0); }
nvtxRangeId_t domain_range_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { return start(open_range(domain_of(d), a)); }
void domain_range_end(nvtxDomainHandle_t, nvtxRangeId_t id) { end(id); }
int domain_range_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { return push(open_range(domain_of(d), a)); }
int domain_range_pop(nvtxDomainHandle_t d) { return pop(domain_of(d)); }
nvtxDomainHandle_t domain_create_a(const char* name) {
    return reinterpret_cast<nvtxDomainHandle_t>(g_domains.add(std::string(name ? name : "", name ? strnlen(name, GT_NVTX_DOMAIN_MAX) : 0)));
}
nvtxDomainHandle_t domain_create_w(const wchar_t* name) {
    std::string n = narrow(name);
    return reinterpret_cast<nvtxDomainHandle_t>(g_domains.add(n.substr(0, GT_NVTX_DOMAIN_MAX)));
}
void domain_destroy(nvtxDomainHandle_t) {} // its handle stays valid: ranges may still name it
nvtxStringHandle_t register_string_a(nvtxDomainHandle_t, const char* s) {
    return reinterpret_cast<nvtxStringHandle_t>(g_strings.add(ascii(s)));
}
nvtxStringHandle_t register_string_w(nvtxDomainHandle_t, const wchar_t* s) {
    return reinterpret_cast<nvtxStringHandle_t>(g_strings.add(narrow(s)));
}

using Fn = NvtxFunctionPointer;
struct Slot {
    int module;
    unsigned id;
    Fn fn;
};
const Slot kSlots[] = {
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartEx, reinterpret_cast<Fn>(range_start_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartA, reinterpret_cast<Fn>(range_start_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartW, reinterpret_cast<Fn>(range_start_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeEnd, reinterpret_cast<Fn>(range_end)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx, reinterpret_cast<Fn>(range_push_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA, reinterpret_cast<Fn>(range_push_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushW, reinterpret_cast<Fn>(range_push_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, reinterpret_cast<Fn>(range_pop)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeStartEx, reinterpret_cast<Fn>(domain_range_start_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeEnd, reinterpret_cast<Fn>(domain_range_end)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx, reinterpret_cast<Fn>(domain_range_push_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop, reinterpret_cast<Fn>(domain_range_pop)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringA, reinterpret_cast<Fn>(register_string_a)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringW, reinterpret_cast<Fn>(register_string_w)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA, reinterpret_cast<Fn>(domain_create_a)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateW, reinterpret_cast<Fn>(domain_create_w)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainDestroy, reinterpret_cast<Fn>(domain_destroy)},
};

bool ours(Fn f) {
    for (const Slot& s : kSlots)
        if (s.fn == f) return true;
    return false;
}

// The slot (a pointer to the module's function pointer) of one callback id; null if none.
Fn* slot_of(GetModuleTable get_table, int module, unsigned id) {
    void*** table = nullptr;
    unsigned int size = 0;
    if (!get_table(module, &table, &size) || !table || id >= size) return nullptr;
    return reinterpret_cast<Fn*>(table[id]);
}

} // namespace

bool nvtx_slots_reachable(GetModuleTable get_table) {
    for (const Slot& s : kSlots)
        if (!slot_of(get_table, s.module, s.id)) return false;
    return true;
}

NvtxFill fill_nvtx_slots(GetModuleTable get_table, FillMode mode) {
    if (!nvtx_slots_reachable(get_table)) return NvtxFill::Unusable; // before any change
    bool all_ours = true;
    for (const Slot& s : kSlots) {
        Fn* slot = slot_of(get_table, s.module, s.id);
        Fn now = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        if (mode == FillMode::Running && now && !ours(now)) return NvtxFill::OtherTool;
        all_ours &= now == s.fn;
    }
    if (all_ours && mode == FillMode::Running) return NvtxFill::AlreadyOurs;
    // A thread calling NVTX now loads either the old slot (null: a no-op) or the agent's function.
    for (const Slot& s : kSlots) __atomic_store_n(slot_of(get_table, s.module, s.id), s.fn, __ATOMIC_RELEASE);
    if (mode != FillMode::Initializing) return NvtxFill::Filled;
    for (int module = NVTX_CB_MODULE_CORE; module < NVTX_CB_MODULE_SIZE; ++module) {
        void*** table = nullptr;
        unsigned int size = 0;
        if (!get_table(module, &table, &size) || !table) continue;
        for (unsigned id = 1; id < size; ++id) {
            auto* slot = reinterpret_cast<Fn*>(table[id]);
            if (slot && !ours(__atomic_load_n(slot, __ATOMIC_ACQUIRE))) __atomic_store_n(slot, Fn{}, __ATOMIC_RELEASE);
        }
    }
    return NvtxFill::Filled;
}

void keep_nvtx_until_session() {
    std::lock_guard lock(session_ring_mutex());
    if (!g_pending && !session_ring()) g_pending = new std::vector<Ended>; // freed by the first session
}

void flush_pending_nvtx() {
    std::lock_guard lock(session_ring_mutex());
    gt_agent_ring* ring = session_ring();
    if (!ring || !g_pending) return;
    for (const Ended& e : *g_pending) write_range(ring, e);
    delete g_pending;
    g_pending = nullptr; // from now on only the ranges of a session are recorded
}

void forget_nvtx_in_child() { // one thread in the child: no lock needed
    if (g_pending) g_pending->clear(); // the parent's ranges are the parent's
    t_ranges = {};
}

} // namespace gtrace::agent

extern "C" {

// Called by NVTX in each module at its first NVTX call when NVTX_INJECTION64_PATH names this
// library (gtrace record). Returns 0 (NVTX then leaves the module's calls as no-ops) when it was
// not gtrace that named it.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
    using namespace gtrace::agent;
    if (!getenv(GT_AGENT_ENV_CONFIG) || !get_export_table) return 0;
    const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
    if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) || !callbacks->GetModuleFunctionTable) return 0;
    auto get_table = reinterpret_cast<GetModuleTable>(callbacks->GetModuleFunctionTable);
    if (fill_nvtx_slots(get_table, FillMode::Injecting) != NvtxFill::Filled) return 0;
    keep_nvtx_until_session();
    return 1;
}
}
