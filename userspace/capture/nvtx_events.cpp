#include "foundation/printable.h"
#include "capture/nvtx_events.h"

#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "decode/nvtx_range.h"

namespace gtrace {
namespace {

// What a table's status means for its module's ranges: captured, or why not.
std::pair<bool, const char*> outcome_of(uint32_t status) {
    switch (status) {
    case GT_NVTX_TABLE_INSTALLED: return {true, "NVTX initialized without a tool: captured from attach on"};
    case GT_NVTX_TABLE_INITIALIZED: return {true, "NVTX not used before attach: captured from its first call"};
    case GT_NVTX_TABLE_OURS: return {true, "already served by gtrace's agent"};
    case GT_NVTX_TABLE_OTHER_TOOL: return {false, "another NVTX tool (nsys, CUPTI, ...) is its injection"};
    case GT_NVTX_TABLE_BUSY: return {false, "its NVTX initialization was under way on another thread throughout"};
    default: return {false, "its nvtxGlobals_v3 is not an NVTX v3 table as gtrace knows it"};
    }
}

} // namespace

std::string NvtxEvents::tables_config(uint32_t pid, const std::vector<Mapping>& maps) {
    // Asked again when the agent was busy: the same tables, each module noted once.
    constexpr size_t kMaxConfig = GT_MAILBOX_CONFIG_MAX / 2; // the rest of the request needs room too
    NvtxModules found = scan_.find(static_cast<int>(pid), maps, target_files_);
    for (const std::string& module : found.unreachable)
        note({pid, module, false, "it uses NVTX, but its table symbol nvtxGlobals_v3 is not in the file (stripped)"});
    std::string config;
    for (const auto& [address, module] : found.tables) {
        std::string item = fmt::format("{}{:x}", config.empty() ? ";nvtx=" : ":", address);
        if (config.size() + item.size() > kMaxConfig) {
            note({pid, module, false, "more modules with NVTX tables than one request to the agent can name"});
            continue;
        }
        config += item;
        asked_.try_emplace({pid, address}, module);
    }
    return config;
}

void NvtxEvents::on_record(uint32_t pid, const gt_gpu_header& h) {
    if (h.type == GT_GPU_NVTX_MODULE && h.size >= sizeof(gt_nvtx_module)) {
        const auto& m = reinterpret_cast<const gt_nvtx_module&>(h);
        auto it = asked_.find({pid, m.table});
        if (it == asked_.end()) return; // not a table gtrace named
        auto [captured, why] = outcome_of(m.status);
        note({pid, it->second, captured, why});
        asked_.erase(it);
        return;
    }
    auto range = decode_nvtx_range(pid, h);
    if (!range) {
        ++invalid_;
        return;
    }
    ++ranges_;
    uint64_t end_ns = range->end_ns;
    std::string name = range->name;
    out_.torch_range({range->pid, range->tid, range->start_ns, end_ns, std::move(range->name), {}, std::move(range->info)});
    script_.on_range(pid, name, end_ns);
}

void NvtxEvents::note(Outcome o) {
    if (!noted_.insert({o.pid, o.module}).second) return;
    // Once per module and reason, whatever the number of processes that map it (every rank of
    // a pip torch job maps the same dozen vendor libraries).
    if (!options_.quiet && !o.captured && warned_.insert({o.module, o.why}).second)
        print_safe(stderr, "gtrace: NVTX ranges of {} are not captured (pid {}, and any other process mapping it): {}\n", o.module,
                   o.pid, o.why);
    outcomes_.push_back(std::move(o));
}

nlohmann::json NvtxEvents::facts() const {
    nlohmann::json modules = nlohmann::json::array();
    auto add = [&](uint32_t pid, const std::string& module, bool captured, const std::string& why) {
        modules.push_back({{"pid", pid}, {"module", module}, {"captured", captured}, {"outcome", why}});
    };
    for (const Outcome& o : outcomes_) add(o.pid, o.module, o.captured, o.why);
    for (const auto& [key, module] : asked_) add(key.first, module, false, "the GPU agent did not serve it (not active in that process)");
    return {{"ranges", ranges_},
            {"records_invalid", invalid_},
            {"injection", options_.launched ? "NVTX_INJECTION64_PATH (record)" : "tables of running modules (attach)"},
            {"modules", modules}};
}

void NvtxEvents::print_summary() const {
    if (!ranges_ && outcomes_.empty() && asked_.empty()) return;
    print_safe(stderr, "  NVTX: {} ranges\n", ranges_);
    // One line per module and outcome, with the processes it holds for.
    std::map<std::tuple<std::string, bool, std::string>, std::vector<uint32_t>> grouped;
    for (const Outcome& o : outcomes_) grouped[{o.module, o.captured, o.why}].push_back(o.pid);
    for (const auto& [key, module] : asked_) grouped[{module, false, "the GPU agent did not serve it"}].push_back(key.first);
    for (const auto& [what, pids] : grouped) {
        const auto& [module, captured, why] = what;
        print_safe(stderr, "  NVTX: {}: {}{} ({} {})\n", module, captured ? "" : "not captured: ", why,
                   pids.size() == 1 ? "pid" : "pids", fmt::join(pids, ", "));
    }
}

} // namespace gtrace
