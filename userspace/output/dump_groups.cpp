#include "output/dump_groups.h"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "foundation/printable.h"
#include "foundation/rank_ranges.h"
#include "model/collective_counts.h"
#include "output/capture_registry.h"

namespace gtrace {
namespace {

constexpr size_t kMaxGroups = 64; // per process, as counted (model/collective_counts.h)
constexpr size_t kMaxIssues = 64; // as kept (model/collective_counts.h)

// A published file is another gtrace's, in root's registry: still, every field is checked.
std::vector<GroupCount> groups_from_json(const nlohmann::json& list) {
    std::vector<GroupCount> out;
    if (!list.is_array()) return out;
    for (const auto& g : list) {
        if (out.size() >= kMaxGroups || !g.is_object()) break;
        GroupCount c;
        if (g.contains("backend") && g["backend"].is_string()) c.backend = g["backend"].get<std::string>().substr(0, 32);
        if (g.contains("last") && g["last"].is_string()) c.last = g["last"].get<std::string>().substr(0, 64);
        if (g.contains("last_completed_ns") && g["last_completed_ns"].is_number_unsigned()) c.last_completed_ns = g["last_completed_ns"].get<uint64_t>();
        // Missing or not a count: a hole that never closed (the safe reading).
        c.hole_until_ns = !g.contains("hole_until_ns") ? 0 : g["hole_until_ns"].is_number_unsigned() ? g["hole_until_ns"].get<uint64_t>() : UINT64_MAX;
        if (g.contains("recent_issues_ns") && g["recent_issues_ns"].is_array())
            for (const auto& t : g["recent_issues_ns"])
                if (t.is_number_unsigned() && c.recent_issues_ns.size() < kMaxIssues) c.recent_issues_ns.push_back(t.get<uint64_t>());
        out.push_back(std::move(c));
    }
    return out;
}

// A map's entries, each naming a set of ranks, the one with the most ranks first (ties in key order).
template <typename Key>
std::vector<std::pair<Key, std::vector<int>>> most_ranks_first(const std::map<Key, std::vector<int>>& by) {
    std::vector<std::pair<Key, std::vector<int>>> listed(by.begin(), by.end());
    std::stable_sort(listed.begin(), listed.end(), [](const auto& x, const auto& y) { return x.second.size() > y.second.size(); });
    return listed;
}

std::string count_word(int64_t n) {
    static const char* words[] = {"none", "one", "two", "three"};
    return n >= 0 && n < 4 ? words[n] : std::to_string(n);
}

} // namespace

PublishedCounts published_group_counts(const std::set<uint32_t>& pids) {
    PublishedCounts out;
    auto registry = CaptureRegistry::open();
    if (!registry) return out;
    for (const std::string& text : registry->published("collectives")) {
        auto j = nlohmann::json::parse(text, nullptr, false);
        if (!j.is_object() || !j.contains("processes") || !j["processes"].is_object()) continue;
        bool used = false;
        for (const auto& [key, list] : j["processes"].items()) {
            uint32_t pid = static_cast<uint32_t>(std::strtoul(key.c_str(), nullptr, 10));
            if (!pids.contains(pid) || out.groups.contains(pid)) continue;
            out.groups[pid] = groups_from_json(list);
            used = true;
        }
        if (!used) continue;
        auto number = [&](const char* key) { return j.contains(key) && j[key].is_number_unsigned() ? j[key].get<uint64_t>() : 0; };
        out.last_change_ns = std::max(out.last_change_ns, number("last_change_ns"));
        uint64_t read_until = number("read_until_ns");
        out.read_until_ns = out.read_until_ns ? std::min(out.read_until_ns, read_until) : read_until;
        out.unrecorded += std::min<uint64_t>(number("unrecorded"), UINT32_MAX);
        if (out.since.empty() && j.contains("start_unix_ms") && j["start_unix_ms"].is_number_unsigned()) {
            std::time_t t = static_cast<std::time_t>(j["start_unix_ms"].get<uint64_t>() / 1000);
            char stamp[32];
            std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&t));
            out.since = stamp;
        }
    }
    return out;
}

bool PublishedCounts::awaiting_capture(uint64_t now_ns) const {
    return !groups.empty() && now_ns >= last_change_ns + CollectiveCounts::kStillNs && read_until_ns < last_change_ns + CollectiveCounts::kStillNs;
}

std::string judge_group_lags(std::vector<RankStanding>& ranks, const PublishedCounts& published, uint64_t now_ns) {
    const auto& counts = published.groups;
    size_t groups = 0;
    std::map<std::vector<std::string>, std::vector<int>> shapes; // each rank's groups' backends
    for (const auto& r : ranks)
        if (auto it = counts.find(r.pid); it != counts.end()) {
            groups = std::max(groups, it->second.size());
            std::vector<std::string> backends;
            for (const auto& g : it->second) backends.push_back(g.backend);
            shapes[backends].push_back(r.rank);
        }
    if (!groups) return "";
    std::string out = fmt::format("collectives per process group (counted by the capture running on this host since {}; each "
                                  "rank's groups in address order, the same on every rank that ran the same code):\n",
                                  published.since.empty() ? "?" : published.since);
    if (now_ns < published.last_change_ns + CollectiveCounts::kStillNs)
        return out + fmt::format("  not compared: the last collective was {:.1f} s ago, the job still makes progress\n",
                                 static_cast<double>(now_ns > published.last_change_ns ? now_ns - published.last_change_ns : 0) / 1e9);
    if (published.awaiting_capture(now_ns))
        return out + "  not compared: the capture has not yet read its ring up to where the counts stood still (it may be behind); "
                     "run gtrace dump again\n";
    if (published.unrecorded)
        return out + fmt::format("  not compared: the capture's ring had no room for {} collective events (see its lost events), "
                                 "so the counts are incomplete\n", published.unrecorded);
    if (shapes.size() > 1) {
        std::string parts;
        for (const auto& [backends, who] : most_ranks_first(shapes))
            parts += fmt::format("{}{} {}: {} group{}", parts.empty() ? "" : ", ", who.size() == 1 ? "rank" : "ranks", rank_ranges(who),
                                 backends.size(), backends.size() == 1 ? "" : "s");
        return out + fmt::format("  not compared: the ranks used different groups since the capture began ({}), so their order does "
                                 "not match them up\n", parts);
    }
    bool any_lag = false, any_left_out = false;
    for (size_t k = 0; k < groups; ++k) {
        struct Member {
            RankStanding* rank;
            const GroupCount* group;
            int64_t entered = 0;
        };
        std::vector<Member> members;
        for (auto& r : ranks)
            if (auto it = counts.find(r.pid); it != counts.end() && k < it->second.size()) members.push_back({&r, &it->second[k]});
        if (members.size() < 2) continue;
        // From the last collective every rank completed: the earliest of the ranks' last completions.
        uint64_t common = UINT64_MAX;
        for (const auto& m : members)
            if (m.group->last_completed_ns) common = std::min(common, m.group->last_completed_ns);
        if (common == UINT64_MAX) common = 0;
        const GroupCount& first = *members.front().group;
        std::string name = fmt::format("group {} ({}{}{})", k, printable(first.backend.empty() ? "?" : first.backend), first.last.empty() ? "" : ": ",
                                       printable(first.last));
        // A call a rank's probes could not record, unsettled at the reference point: its counts there are not whole.
        std::vector<int> holed;
        for (const auto& m : members)
            if (m.group->hole_until_ns > common) holed.push_back(m.rank->rank);
        if (!holed.empty()) {
            std::sort(holed.begin(), holed.end());
            out += fmt::format("  {}: not compared: the capture could not record a collective of {} {} after the last one every rank "
                               "completed (see its lost events)\n", name, holed.size() == 1 ? "rank" : "ranks", rank_ranges(holed));
            any_left_out = true;
            continue;
        }
        std::map<int64_t, std::vector<int>> by_entered;
        for (auto& m : members) {
            m.entered = std::count_if(m.group->recent_issues_ns.begin(), m.group->recent_issues_ns.end(), [&](uint64_t t) { return t > common; });
            by_entered[m.entered].push_back(m.rank->rank);
        }
        if (by_entered.size() == 1) {
            out += fmt::format("  {}: ranks {} entered as many\n", name, rank_ranges(by_entered.begin()->second));
            continue;
        }
        // What most of the group's ranks entered (a tie: the larger count, the others have yet to come).
        auto most = std::max_element(by_entered.begin(), by_entered.end(), [](const auto& a, const auto& b) {
            return a.second.size() < b.second.size() || (a.second.size() == b.second.size() && a.first < b.first);
        });
        std::string parts;
        for (const auto& [entered, who] : most_ranks_first(by_entered))
            parts += fmt::format("{}{} {}: {}", parts.empty() ? "" : ", ", who.size() == 1 ? "rank" : "ranks", rank_ranges(who), entered);
        out += fmt::format("  {}: entered after the last one every rank completed: {}\n", name, parts);
        for (auto& m : members) {
            if (m.entered == most->first) continue;
            any_lag = true;
            int64_t d = m.entered - most->first;
            std::string lag = fmt::format("{} {} on process {}", count_word(d < 0 ? -d : d), d < 0 ? "behind" : "ahead", name);
            m.rank->lag += (m.rank->lag.empty() ? "" : "; ") + lag;
        }
    }
    if (!any_lag) out += any_left_out ? "  no rank behind or ahead of the others on the groups compared\n"
                                      : "  no rank behind or ahead of the others on any group\n";
    return out;
}

} // namespace gtrace
