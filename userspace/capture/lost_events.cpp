#include "capture/lost_events.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace gtrace {
namespace {

// "lost_python_stacks" → "python_stacks": the class as otherData.lost.bpf_ring names it.
std::string class_key(unsigned event_class) {
    const char* name = counter_name(event_class);
    if (!name) return fmt::format("class_{}", event_class);
    return strncmp(name, "lost_", 5) == 0 ? name + 5 : name;
}

} // namespace

nlohmann::json lost_facts(const TraceModel& model) {
    nlohmann::json bpf = {{"total", model.bpf_ring_lost()}};
    for (unsigned i = 1; i < GT_EV_CLASS_COUNT; ++i) bpf[class_key(i)] = model.counters[i];
    return {{"total", model.lost_events()}, {"bpf_ring", bpf}, {"agent_ring", model.agent_ring_lost}, {"cupti", model.cupti_lost}};
}

std::string lost_summary(const TraceModel& model) {
    uint64_t total = model.lost_events();
    if (!total) return "lost events: 0";
    std::string sources;
    auto add = [&](const std::string& part) { sources += (sources.empty() ? "" : "; ") + part; };
    if (uint64_t bpf = model.bpf_ring_lost()) {
        std::string classes;
        for (unsigned i = 1; i < GT_EV_CLASS_COUNT; ++i)
            if (model.counters[i]) {
                std::string key = class_key(i);
                std::replace(key.begin(), key.end(), '_', ' ');
                classes += fmt::format("{}{} {}", classes.empty() ? "" : ", ", model.counters[i], key);
            }
        add(fmt::format("BPF ring full: {} ({}), raise --buffer-size", bpf, classes));
    }
    if (model.agent_ring_lost)
        add(fmt::format("agent rings full: {} GPU records or calls (gtrace read them too slowly)", model.agent_ring_lost));
    if (model.cupti_lost) add(fmt::format("dropped by CUPTI: {} GPU records (no free activity buffer in the agent)", model.cupti_lost));
    return fmt::format("WARNING: {} events were LOST, the trace is incomplete: {}", total, sources);
}

} // namespace gtrace
