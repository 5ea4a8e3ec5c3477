// Which rank fell behind on a process group when every rank's stack looks alike: the collectives
// each rank entered per group, as a capture running on this host counted them
// (model/collective_counts.h, published in the registry: output/capture_registry.h). Groups are
// matched across ranks by their order in each process (group 0, 1, ...: by address); on each group, what each
// rank issued after the last collective of the group every rank completed is compared with what
// most of its ranks issued: a rank with fewer skipped one (behind), with more went on without the
// others (ahead) — either way the odd one out.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "output/dump_standing.h"

namespace gtrace {

struct GroupCount {
    std::string backend, last;
    uint64_t last_completed_ns = 0;
    std::vector<uint64_t> recent_issues_ns;
};

// What running captures published for these processes: pid -> its groups in order (empty when no
// capture counted them). `since`: when the capture that counted them started ("" when none did).
std::map<uint32_t, std::vector<GroupCount>> published_group_counts(const std::set<uint32_t>& pids, std::string* since);

// Sets each lagging rank's RankStanding::lag ("one behind on process group 1 (gloo)") and returns
// the lines that say what each group's ranks entered ("" without counts).
std::string judge_group_lags(std::vector<RankStanding>& ranks, const std::map<uint32_t, std::vector<GroupCount>>& counts,
                             const std::string& since);

} // namespace gtrace
