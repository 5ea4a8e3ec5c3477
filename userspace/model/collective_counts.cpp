#include "model/collective_counts.h"

#include <algorithm>

namespace gtrace {

// An unrecorded call opens a hole in its thread's counts (the earliest, if several); any other
// record of the thread that started since closes it at its end. True: `c` was only that news.
bool CollectiveCounts::record_hole(const Collective& c) {
    if (c.unrecorded) {
        Holes& h = holes_[c.pid];
        if (h.open.size() < kMaxOpenHoles || h.open.contains(c.tid)) h.open.try_emplace(c.tid, c.start_ns);
        else h.open.try_emplace(0, 0); // too many threads with holes: one that never closes
        return true;
    }
    auto h = holes_.find(c.pid);
    if (h == holes_.end()) return false;
    if (auto open = h->second.open.find(c.tid); open != h->second.open.end() && c.start_ns >= open->second) {
        h->second.closed_until_ns = std::max(h->second.closed_until_ns, c.end_ns);
        h->second.open.erase(open);
    }
    return false;
}

uint64_t CollectiveCounts::hole_until_ns(uint32_t pid) const {
    auto h = holes_.find(pid);
    if (h == holes_.end()) return 0;
    return h->second.open.empty() ? h->second.closed_until_ns : UINT64_MAX;
}

void CollectiveCounts::on_collective(const Collective& c) {
    if (c.nccl) return; // c10d's calls are counted; the NCCL calls they make would count them twice
    changed_ = true;
    last_change_ns_ = std::max(last_change_ns_, c.end_ns);
    if (record_hole(c)) return;
    auto& groups = groups_[c.pid];
    if (c.ddp_gradients) { // DDP waited for every bucket it issued: each group with an issue before it completed
        for (auto& [group, g] : groups)
            if (!g.recent_issues_ns.empty() && g.recent_issues_ns.back() <= c.start_ns && g.completed < g.issued)
                g.completed = g.issued, g.last_completed_ns = c.end_ns;
        return;
    }
    if (!c.group || (!groups.contains(c.group) && groups.size() >= kMaxGroups)) return;
    GroupActivity& g = groups[c.group];
    if (c.backend) g.backend = c.backend;
    if (c.wait) {
        ++g.completed;
        g.last_completed_ns = std::max(g.last_completed_ns, c.end_ns);
        return;
    }
    ++g.issued;
    g.last = c.name;
    g.recent_issues_ns.push_back(c.start_ns);
    if (g.recent_issues_ns.size() > kRecentIssues) g.recent_issues_ns.pop_front();
}

bool CollectiveCounts::due_for_publication(uint64_t read_until_ns) {
    if (std::exchange(changed_, false)) return true;
    // Standing still: again at every look (about each second), with how far the capture read —
    // a dump joining counts of several captures needs each one's reading to be recent.
    return last_change_ns_ && read_until_ns >= last_change_ns_ + kStillNs;
}

nlohmann::json CollectiveCounts::facts() const {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [pid, groups] : groups_) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& [address, g] : groups)
            list.push_back({{"index", list.size()}, {"backend", g.backend}, {"last", g.last}, {"issued", g.issued},
                            {"completed", g.completed}, {"last_completed_ns", g.last_completed_ns},
                            {"recent_issues_ns", g.recent_issues_ns}, {"hole_until_ns", hole_until_ns(pid)}});
        out[std::to_string(pid)] = std::move(list);
    }
    return out;
}

} // namespace gtrace
