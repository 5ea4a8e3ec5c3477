#include "analyze/nccl_traffic.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "analyze/collectives.h"
#include "format/nccl_names.h"

namespace gtrace {
namespace {

// The kind a call is counted under: nccl-tests' names; a send and a receive are one SendRecv.
std::string kind_of(unsigned api) {
    switch (api) {
    case GT_NCCL_ALL_REDUCE: return "AllReduce";
    case GT_NCCL_ALL_GATHER: return "AllGather";
    case GT_NCCL_REDUCE_SCATTER: return "ReduceScatter";
    case GT_NCCL_BROADCAST:
    case GT_NCCL_BCAST: return "Broadcast";
    case GT_NCCL_REDUCE: return "Reduce";
    case GT_NCCL_SEND:
    case GT_NCCL_RECV: return "SendRecv";
    case GT_NCCL_ALL_TO_ALL: return "AlltoAll";
    case GT_NCCL_GATHER: return "Gather";
    case GT_NCCL_SCATTER: return "Scatter";
    default: return {};
    }
}

// The calls whose count is per rank: nccl-tests' size is count x the datatype's size x nranks
// (all_gather.cu, reduce_scatter.cu, alltoall.cu, gather.cu, scatter.cu).
bool scales_with_ranks(const std::string& kind) {
    return kind == "AllGather" || kind == "ReduceScatter" || kind == "AlltoAll" || kind == "Gather" || kind == "Scatter";
}

struct Call {
    const CollectiveSpan* span;
    unsigned api;
    std::string kind;
    uint32_t nranks; // 0: communicator not seen created
};

// A set of calls one launch ran: a call outside a group, or a group's calls (ended by one GroupEnd).
struct Batch {
    std::vector<const Call*> calls;
    std::string kind; // the calls' common kind, or Group(A+B)
};

std::string batch_kind(const std::vector<const Call*>& calls) {
    std::vector<std::string> kinds;
    for (const Call* c : calls)
        if (std::find(kinds.begin(), kinds.end(), c->kind) == kinds.end()) kinds.push_back(c->kind);
    if (kinds.size() == 1) return kinds.front();
    std::string out = "Group(";
    for (size_t i = 0; i < kinds.size(); ++i) out += (i ? "+" : "") + kinds[i];
    return out + ")";
}

// The size of a batch's calls as nccl-tests counts it; per rank for AllGather/ReduceScatter on a
// communicator of unknown size (`unscaled`). SendRecv: what was sent, or received if nothing was.
void batch_size(const std::vector<const Call*>& calls, double& scaled, double& unscaled) {
    double sent = 0, received = 0;
    for (const Call* c : calls) {
        double b = static_cast<double>(c->span->bytes);
        if (c->api == GT_NCCL_SEND) sent += b;
        else if (c->api == GT_NCCL_RECV) received += b;
        else if (!scales_with_ranks(c->kind)) scaled += b;
        else if (c->nranks) scaled += b * c->nranks;
        else unscaled += b;
    }
    scaled += sent > 0 ? sent : received;
}

} // namespace

double nccl_bus_factor(const std::string& kind, uint32_t n) {
    if (n == 0) return 0;
    double ranks = static_cast<double>(n);
    if (kind == "AllReduce") return 2 * (ranks - 1) / ranks;
    if (scales_with_ranks(kind)) return (ranks - 1) / ranks; // nccl-tests' *GetBw: (n-1)/n for each of these
    if (kind == "Broadcast" || kind == "Reduce" || kind == "SendRecv") return 1;
    return 0; // a group of several kinds: no one factor
}

void add_nccl_traffic(const ProcessData& p, const Span& window, const std::vector<bool>* included, NcclSums& sums,
                      std::unordered_set<uint32_t>* joined) {
    for (const auto& c : p.collectives)
        if (c.nccl && c.nranks) sums.comm_size[c.comm] = c.nranks;
    // Each thread's NCCL calls in time order (the outermost only: they do not overlap).
    std::map<uint32_t, std::vector<Call>> by_thread;
    for (size_t i = 0; i < p.collectives.size(); ++i) {
        const auto& c = p.collectives[i];
        if (!c.nccl || (included && !(*included)[i])) continue;
        unsigned api = nccl_api_from_symbol(c.name);
        if (api != GT_NCCL_GROUP_END && !nccl_api_moves_data(api)) continue;
        if (c.result != 0 && api != GT_NCCL_GROUP_END) continue; // it failed (bad arguments, an aborted communicator): moved nothing
        auto size = sums.comm_size.find(c.comm);
        by_thread[c.tid].push_back({&c, api, kind_of(api), size != sums.comm_size.end() ? size->second : 0});
    }
    for (auto& [tid, calls] : by_thread)
        std::sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return a.span->start_ns < b.span->start_ns; });
    auto& kinds = sums.kinds;
    auto in_window = [&](const CollectiveSpan& s) { return s.start_ns >= window.start_ns && s.start_ns < window.end_ns; };
    // Every data call in the steps is counted, joined or not: by batch (a group's sends and
    // receives are one exchange), each kind's calls apart.
    auto count_batch = [&](const std::vector<const Call*>& batch) {
        std::map<std::string, std::vector<const Call*>> by_kind;
        for (const Call* c : batch)
            if (in_window(*c->span)) by_kind[c->kind].push_back(c);
        for (const auto& [kind, calls] : by_kind) {
            NcclKindSums& t = kinds[kind];
            t.calls += calls.size();
            batch_size(calls, t.bytes, t.unscaled_bytes);
            for (const Call* c : calls) t.nranks = std::max(t.nranks, c->nranks);
        }
    };
    for (const auto& [tid, calls] : by_thread) {
        std::vector<const Call*> group;
        for (const Call& c : calls) {
            if (c.api == GT_NCCL_GROUP_END) {
                if (c.span->group_depth == 0) count_batch(group), group.clear();
            } else if (c.span->group_depth == 0) {
                count_batch({&c});
            } else {
                group.push_back(&c);
            }
        }
        count_batch(group); // a group not ended in the capture
    }
    // The batch a launch at `t` on `tid` ran: the call (depth 0) or outermost GroupEnd around it.
    auto batch_at = [&](uint32_t tid, uint64_t t) -> std::optional<Batch> {
        auto it = by_thread.find(tid);
        if (it == by_thread.end()) return std::nullopt;
        const auto& calls = it->second;
        auto after = std::upper_bound(calls.begin(), calls.end(), t, [](uint64_t v, const Call& c) { return v < c.span->start_ns; });
        if (after == calls.begin()) return std::nullopt;
        auto at = std::prev(after);
        if (t > at->span->end_ns || at->span->group_depth != 0) return std::nullopt;
        Batch b;
        if (at->api != GT_NCCL_GROUP_END) {
            b.calls.push_back(&*at);
        } else { // the group's calls: back to the previous call made outside any group
            for (auto g = at; g != calls.begin();) {
                --g;
                if (g->span->group_depth == 0) break;
                if (g->api != GT_NCCL_GROUP_END) b.calls.push_back(&*g);
            }
        }
        if (b.calls.empty()) return std::nullopt;
        b.kind = batch_kind(b.calls);
        return b;
    };
    std::unordered_map<uint32_t, const CallSpan*> launches;
    for (const auto& c : p.calls)
        if (c.correlation) launches[c.correlation] = &c;
    std::map<std::pair<uint32_t, uint64_t>, bool> batch_joined; // (tid, batch's first call): its bytes counted once
    for (const auto& g : p.gpu) {
        if (g.kind != GpuKind::Kernel || !g.correlation || !is_communication_kernel(g.name)) continue;
        auto launch = launches.find(g.correlation);
        if (launch == launches.end()) continue;
        auto batch = batch_at(launch->second->tid, launch->second->start_ns);
        if (!batch || !in_window(*batch->calls.front()->span)) continue;
        NcclKindSums& t = kinds[batch->kind];
        ++t.kernels;
        t.kernel_ns += g.dur();
        if (joined) joined->insert(g.correlation);
        if (!batch_joined.emplace(std::make_pair(launch->second->tid, batch->calls.front()->span->start_ns), true).second) continue;
        batch_size(batch->calls, t.joined_bytes, t.unscaled_joined_bytes);
        for (const Call* c : batch->calls)
            if (c->nranks) t.nranks = std::max(t.nranks, c->nranks);
    }
}

void gather_nccl_traffic(const ProcessData& p, const Span& window, const NcclSums* closed, ProcessAnalysis& out) {
    out.world_size = p.world_size;
    NcclSums sums = closed ? *closed : NcclSums{};
    add_nccl_traffic(p, window, nullptr, sums, nullptr);
    out.nccl_traffic.clear();
    for (const auto& [name, k] : sums.kinds) {
        NcclTraffic t;
        t.name = name, t.calls = k.calls, t.bytes = k.bytes, t.kernels = k.kernels, t.kernel_ms = static_cast<double>(k.kernel_ns) / 1e6;
        t.joined_bytes = k.joined_bytes, t.nranks = k.nranks, t.unscaled_bytes = k.unscaled_bytes, t.unscaled_joined_bytes = k.unscaled_joined_bytes;
        out.nccl_traffic.push_back(std::move(t));
    }
    std::stable_sort(out.nccl_traffic.begin(), out.nccl_traffic.end(),
                     [](const NcclTraffic& a, const NcclTraffic& b) { return a.bytes + a.unscaled_bytes > b.bytes + b.unscaled_bytes; });
}

std::vector<NcclTraffic> combined_nccl_traffic(const std::vector<const ProcessAnalysis*>& ranks) {
    std::map<std::string, NcclTraffic> kinds;
    for (const ProcessAnalysis* r : ranks) {
        double steps = r->step_count() ? static_cast<double>(r->step_count()) : 1;
        for (const NcclTraffic& t : r->nccl_traffic) {
            NcclTraffic& k = kinds[t.name];
            k.name = t.name;
            k.calls += t.calls, k.kernels += t.kernels;
            k.bytes += t.bytes / steps; // all per step: the bandwidths over per-step sums weigh each rank's step alike
            k.kernel_ms += t.kernel_ms / steps, k.joined_bytes += t.joined_bytes / steps;
            k.nranks = std::max(k.nranks, t.nranks), k.nranks_assumed = k.nranks_assumed || t.nranks_assumed;
        }
    }
    std::vector<NcclTraffic> out;
    for (auto& [name, k] : kinds) {
        k.algbw_gbps = k.kernel_ms > 0 ? k.joined_bytes / (k.kernel_ms * 1e6) : 0;
        k.busbw_gbps = k.algbw_gbps * nccl_bus_factor(k.name, k.nranks);
        out.push_back(std::move(k));
    }
    std::stable_sort(out.begin(), out.end(), [](const NcclTraffic& a, const NcclTraffic& b) { return a.bytes > b.bytes; });
    return out;
}

void nccl_bandwidths(std::vector<ProcessAnalysis>& all) {
    uint32_t job_ranks = static_cast<uint32_t>(std::count_if(all.begin(), all.end(), [](const ProcessAnalysis& r) { return r.rank.has_value(); }));
    for (auto& r : all) {
        for (auto& t : r.nccl_traffic) {
            uint32_t world = r.world_size && *r.world_size > 0 ? static_cast<uint32_t>(*r.world_size) : r.rank ? job_ranks : 0;
            if (!t.nranks && world) t.nranks = world, t.nranks_assumed = true;
            // Calls on communicators not seen created: as the world's (not known: the rank's own buffer).
            double scale = world ? world : 1;
            t.bytes += t.unscaled_bytes * scale, t.unscaled_bytes = 0;
            t.joined_bytes += t.unscaled_joined_bytes * scale, t.unscaled_joined_bytes = 0;
            t.algbw_gbps = t.kernel_ms > 0 ? t.joined_bytes / (t.kernel_ms * 1e6) : 0; // bytes per ns = GB/s
            t.busbw_gbps = t.algbw_gbps * nccl_bus_factor(t.name, t.nranks);
        }
        std::stable_sort(r.nccl_traffic.begin(), r.nccl_traffic.end(), [](const NcclTraffic& a, const NcclTraffic& b) { return a.bytes > b.bytes; });
    }
}

} // namespace gtrace
