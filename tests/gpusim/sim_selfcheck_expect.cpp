// gpusim_selfcheck: checking workload steps against the correlation rules (CUPTI_CORRELATION.md).
#include "sim_selfcheck_expect.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <map>

namespace selfcheck {
namespace {

struct Step {
    std::vector<CallExpect> calls;
    size_t first = 0, last = 0;
    uint32_t tid = 0;
};
std::mutex g_steps_mu;
std::vector<Step> g_steps;

// Everything the records and the log say about one correlation id.
struct ById {
    std::vector<const CUpti_ActivityAPI*> runtime, driver;
    std::vector<const CUpti_ActivityKernel10*> kernels;
    std::vector<const CUpti_ActivityMemcpy6*> memcpys;
    std::vector<const CUpti_ActivityMemset4*> memsets;
    std::vector<const LogLine*> lines;
};

bool matches(const OpExpect& e, const CUpti_ActivityKernel10* k) {
    return std::string(e.kind) == "kernel" && k->name == e.name && uint32_t(k->gridX) == e.grid_x;
}

void check_call(const CallExpect& want, const ObservedCall& got, uint32_t tid, ById& by) {
    bool runtime = want.domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    CHECK(got.domain == want.domain && got.function == want.function && got.tid == tid);
    // The runtime's own driver call: driver callbacks with the runtime call's id, nothing else.
    if (want.nested) {
        CHECK(got.inner.size() == 2);
        for (size_t i = 0; i < got.inner.size(); ++i) {
            const ApiEvent& e = got.inner[i];
            CHECK(e.domain == CUPTI_CB_DOMAIN_DRIVER_API && e.function == want.nested);
            CHECK(e.correlation == got.correlation && e.enter == (i == 0) && e.tid == tid);
        }
    } else {
        CHECK(got.inner.empty());
    }
    // One API record, of the owner's kind: the nested driver call has none.
    const auto& own = runtime ? by.runtime : by.driver;
    const auto& other = runtime ? by.driver : by.runtime;
    CHECK(own.size() == 1 && other.empty());
    if (own.size() == 1) CHECK(own[0]->cbid == got.cbid && own[0]->threadId == tid);
    // Every op carries the owner's id; copies name the runtime call, or none for driver calls.
    size_t kernels = 0, copies = 0, sets = 0;
    for (const OpExpect& e : want.ops) {
        std::string kind = e.kind;
        if (kind == "kernel") {
            ++kernels;
            bool found = false;
            for (auto* k : by.kernels)
                if (matches(e, k)) {
                    found = true;
                    CHECK((k->launchType == CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE) == want.cooperative);
                    CHECK(k->graphId == 0 && k->graphNodeId == 0);
                }
            CHECK(found);
        } else if (kind == "memcpy") {
            ++copies;
            bool found = false;
            for (auto* m : by.memcpys) {
                if (m->bytes != e.bytes) continue;
                found = true;
                CHECK(m->runtimeCorrelationId == (runtime ? got.correlation : 0));
            }
            CHECK(found);
        } else {
            ++sets;
            bool found = false;
            for (auto* m : by.memsets) found = found || m->bytes == e.bytes;
            CHECK(found);
        }
    }
    CHECK(by.kernels.size() == kernels && by.memcpys.size() == copies && by.memsets.size() == sets);
    CHECK(by.lines.size() == want.ops.size());
    for (const LogLine* l : by.lines) CHECK(l->api == want.function && l->graph == 0 && l->graph_node == 0);
}

} // namespace

bool split_calls(size_t first, size_t last, std::vector<ObservedCall>* out) {
    std::lock_guard lk(events().mu);
    int depth = 0;
    for (size_t i = first; i < last && i < events().list.size(); ++i) {
        const ApiEvent& e = events().list[i];
        if (depth == 0) {
            if (!e.enter) return false;
            out->push_back(ObservedCall{e.domain, e.cbid, e.correlation, e.tid, e.function, {}});
            depth = 1;
        } else if (e.enter) {
            ++depth;
            out->back().inner.push_back(e);
        } else if (--depth == 0) {
            const ObservedCall& c = out->back();
            if (e.domain != c.domain || e.correlation != c.correlation || e.function != c.function) return false;
        } else {
            out->back().inner.push_back(e);
        }
    }
    return depth == 0;
}

void clear_expectations() {
    std::lock_guard lk(g_steps_mu);
    g_steps.clear();
}

void expect(std::vector<CallExpect> calls, const std::function<void()>& fn) {
    Step s;
    s.calls = std::move(calls);
    s.tid = uint32_t(syscall(SYS_gettid));
    s.first = events().size();
    fn();
    s.last = events().size();
    std::lock_guard lk(g_steps_mu);
    g_steps.push_back(std::move(s));
}

size_t check_expectations(const std::string& log_path) {
    std::vector<LogLine> lines = read_log(log_path, uint64_t(getpid()));
    Collected& c = collected();
    std::lock_guard lk(c.mu);
    std::map<uint32_t, ById> by;
    for (auto& r : c.apis) by[r.correlationId].runtime.push_back(&r);
    for (auto& r : c.drivers) by[r.correlationId].driver.push_back(&r);
    for (auto& r : c.kernels) by[r.correlationId].kernels.push_back(&r);
    for (auto& r : c.memcpys) by[r.correlationId].memcpys.push_back(&r);
    for (auto& r : c.memsets) by[r.correlationId].memsets.push_back(&r);
    for (auto& l : lines) by[uint32_t(l.correlation)].lines.push_back(&l);
    CHECK(c.bad_records == 0);
    size_t checked = 0;
    uint32_t last = 0;
    std::lock_guard slk(g_steps_mu);
    for (const Step& s : g_steps) {
        std::vector<ObservedCall> got;
        CHECK(split_calls(s.first, s.last, &got));
        CHECK(got.size() == s.calls.size());
        for (size_t i = 0; i < got.size() && i < s.calls.size(); ++i) {
            // Every outermost call takes a new id, in issue order (the steps ran one by one).
            CHECK(got[i].correlation > last);
            last = got[i].correlation;
            check_call(s.calls[i], got[i], s.tid, by[got[i].correlation]);
            ++checked;
        }
    }
    return checked;
}

} // namespace selfcheck
