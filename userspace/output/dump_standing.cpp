#include "output/dump_standing.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "foundation/printable.h"

namespace gtrace {
namespace {

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// "barrier (/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:3132)" -> "barrier".
std::string function_of(const std::string& frame) { return frame.substr(0, frame.find(" (")); }

// What a frame says the thread waits in, if it is a known wait: torch.distributed's collectives
// and barriers (distributed_c10d.py), DDP's reducer, a CUDA sync, the DataLoader's next batch.
std::optional<std::pair<std::string, bool>> known_wait(const std::string& frame, bool python) {
    if (python) {
        if (contains(frame, "torch/distributed/distributed_c10d.py")) return std::pair{function_of(frame), true};
        if (contains(frame, "torch/utils/data/dataloader.py") && contains(frame, "__next__")) return std::pair{std::string("DataLoader.__next__"), false};
        if (contains(frame, "torch/cuda/") && contains(frame, "synchronize")) return std::pair{std::string("torch.cuda.synchronize"), false};
        return std::nullopt;
    }
    for (std::string_view part : {"c10d::", "gloo::", "ncclAllReduce", "ncclBroadcast", "ncclAllGather", "ncclReduceScatter"})
        if (contains(frame, part)) return std::pair{function_of(frame), true};
    for (std::string_view part : {"Synchronize", "cudaMemcpy"})
        if (contains(frame, part)) return std::pair{function_of(frame), false};
    return std::nullopt;
}

} // namespace

std::vector<RankStanding> rank_standings(const std::vector<DumpedThread>& threads, const std::string& node) {
    std::vector<RankStanding> out;
    for (const DumpedThread& t : threads) {
        if (!t.is_rank_main || !t.owner.starts_with("rank ")) continue;
        RankStanding s;
        s.rank = std::atoi(t.owner.c_str() + 5);
        s.pid = t.pid, s.node = node, s.where = t.caller, s.asleep_s = t.asleep_s;
        // The innermost known wait: Python's frames first (they name the collective), then native.
        for (const auto& f : t.python)
            if (auto w = known_wait(f, true)) {
                std::tie(s.what, s.in_collective) = *w;
                break;
            }
        if (s.what.empty())
            for (const auto& f : t.native)
                if (auto w = known_wait(f, false)) {
                    std::tie(s.what, s.in_collective) = *w;
                    break;
                }
        if (s.what.empty()) s.what = !t.python.empty() ? function_of(t.python.front()) : !t.native.empty() ? t.native.front() : "no stack";
        out.push_back(std::move(s));
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    return out;
}

namespace {

struct Group {
    std::string what, where, lag;
    bool in_collective = false;
    std::vector<int> ranks;
    std::optional<double> asleep_min, asleep_max; // over its ranks asleep
};

std::vector<Group> groups_of(const std::vector<RankStanding>& ranks) {
    std::map<std::tuple<std::string, std::string, std::string>, Group> by_place;
    for (const auto& r : ranks) {
        Group& g = by_place[{r.what, r.where, r.lag}];
        g.what = r.what, g.where = r.where, g.lag = r.lag, g.in_collective = r.in_collective;
        g.ranks.push_back(r.rank);
        if (r.asleep_s) {
            g.asleep_min = std::min(g.asleep_min.value_or(*r.asleep_s), *r.asleep_s);
            g.asleep_max = std::max(g.asleep_max.value_or(*r.asleep_s), *r.asleep_s);
        }
    }
    std::vector<Group> out;
    for (auto& [place, g] : by_place) out.push_back(std::move(g));
    std::stable_sort(out.begin(), out.end(), [](const Group& a, const Group& b) { return a.ranks.size() > b.ranks.size(); });
    return out;
}

// " (for 212 s, asleep)": how long the group's main threads have slept (since they last ran),
// when a second or more; " (for 198-212 s, asleep)" when they differ by a second or more.
std::string asleep_text(const Group& g) {
    if (!g.asleep_min || *g.asleep_max < 1) return "";
    if (*g.asleep_max - *g.asleep_min < 1) return fmt::format(" (for {:.0f} s, asleep)", *g.asleep_max);
    return fmt::format(" (for {:.0f}-{:.0f} s, asleep)", *g.asleep_min, *g.asleep_max);
}

} // namespace

std::vector<int> odd_ones_out(const std::vector<RankStanding>& ranks) {
    std::vector<Group> groups = groups_of(ranks);
    if (groups.size() < 2) return {};
    // The ranks that wait are those in a collective; the largest such group (of ranks in step) is
    // the job's place.
    auto waiting = std::find_if(groups.begin(), groups.end(), [](const Group& g) { return g.in_collective && g.lag.empty(); });
    if (waiting == groups.end()) waiting = std::find_if(groups.begin(), groups.end(), [](const Group& g) { return g.lag.empty(); });
    const Group& main = waiting != groups.end() ? *waiting : groups.front();
    std::vector<int> out;
    for (const auto& r : ranks)
        if (std::find(main.ranks.begin(), main.ranks.end(), r.rank) == main.ranks.end() || !r.lag.empty()) out.push_back(r.rank);
    return out;
}

std::string format_standings(const std::vector<RankStanding>& ranks) {
    if (ranks.empty()) return "";
    std::vector<int> odd = odd_ones_out(ranks);
    std::string out = "where the ranks stand:\n";
    for (const Group& g : groups_of(ranks)) {
        bool is_odd = std::find(odd.begin(), odd.end(), g.ranks.front()) != odd.end();
        std::string who = fmt::format("{} {}", g.ranks.size() == 1 ? "rank" : "ranks", rank_ranges(g.ranks));
        // "in hang_here (hang.py:22)", not "in hang_here at hang_here (hang.py:22)"
        std::string place = g.where.empty() ? printable(g.what)
                            : function_of(g.where) == g.what ? printable(g.where)
                                                             : printable(g.what) + " at " + printable(g.where);
        out += fmt::format("  {} {} {}{}{}\n", who, g.in_collective ? (g.ranks.size() == 1 ? "waits in" : "wait in") : (g.ranks.size() == 1 ? "is in" : "are in"), place,
                           asleep_text(g),
                           is_odd ? fmt::format(" <- the odd one{} out{}: the others wait for {}", g.ranks.size() == 1 ? "" : "s",
                                                g.lag.empty() ? "" : ", " + printable(g.lag), g.ranks.size() == 1 ? "it" : "them")
                                  : "");
    }
    return out;
}

nlohmann::json standings_json(const std::vector<RankStanding>& ranks) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : ranks)
        out.push_back({{"rank", r.rank}, {"pid", r.pid}, {"node", r.node}, {"what", r.what}, {"where", r.where},
                       {"in_collective", r.in_collective}, {"asleep_s", r.asleep_s ? nlohmann::json(*r.asleep_s) : nlohmann::json()},
                       {"lag", r.lag}});
    return out;
}

Result<std::vector<RankStanding>> standings_from_json(const nlohmann::json& j, const std::string& path) {
    auto bad = [&](const char* why) { return make_error(ExitCode::BadTrace, fmt::format("{}: not a gtrace dump --json file: {}", path, why)); };
    if (!j.is_object() || !j.contains("ranks") || !j["ranks"].is_array()) return bad("no \"ranks\" array");
    std::vector<RankStanding> out;
    for (const auto& r : j["ranks"]) {
        if (!r.is_object() || !r.value("rank", nlohmann::json()).is_number_integer()) return bad("a rank without its number");
        RankStanding s;
        const int64_t rank = r["rank"].get<int64_t>();
        if (rank < 0 || rank > (1 << 24)) return bad("a rank number out of range");
        s.rank = static_cast<int>(rank);
        auto text = [&](const char* key) { return r.contains(key) && r[key].is_string() ? r[key].get<std::string>() : std::string(); };
        if (r.contains("pid") && r["pid"].is_number_unsigned()) s.pid = static_cast<uint32_t>(std::min<uint64_t>(r["pid"].get<uint64_t>(), UINT32_MAX));
        s.node = text("node"), s.what = text("what"), s.where = text("where"), s.lag = text("lag").substr(0, 512);
        s.in_collective = r.contains("in_collective") && r["in_collective"].is_boolean() && r["in_collective"].get<bool>();
        if (r.contains("asleep_s") && r["asleep_s"].is_number() && r["asleep_s"].get<double>() >= 0 && r["asleep_s"].get<double>() < 1e9)
            s.asleep_s = r["asleep_s"].get<double>();
        out.push_back(std::move(s));
    }
    return out;
}

} // namespace gtrace
