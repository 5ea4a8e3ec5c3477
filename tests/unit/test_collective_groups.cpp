// Collectives per process group: what a capture counts per process (model/collective_counts.h)
// and how `gtrace dump` tells a rank behind on a group from those counts (output/dump_groups.h).
#include <catch2/catch.hpp>

#include "model/collective_counts.h"
#include "output/dump_groups.h"

using namespace gtrace;

namespace {

Collective issue(uint32_t pid, uint64_t group, uint64_t t) {
    Collective c;
    c.pid = pid, c.tid = pid, c.start_ns = t, c.end_ns = t + 10, c.name = "all_reduce", c.backend = "gloo", c.group = group;
    return c;
}

Collective completion(uint32_t pid, uint64_t group, uint64_t start, uint64_t end) {
    Collective c = issue(pid, group, start);
    c.wait = true, c.end_ns = end;
    return c;
}

// Rank r (pid 100 + r) with groups at addresses 0x2000 (second) and 0x1000 (world): both
// complete collective n at time 1000 n; after the last, ranks issue what `next` says.
PublishedCounts counted(int ranks, int rounds, const std::vector<std::vector<uint64_t>>& next,
                        const std::vector<Collective>& also = {}) {
    CollectiveCounts counts;
    for (const Collective& c : also) counts.on_collective(c);
    for (int r = 0; r < ranks; ++r) {
        uint32_t pid = 100 + static_cast<uint32_t>(r);
        for (int n = 1; n <= rounds; ++n)
            for (uint64_t group : {0x2000ull, 0x1000ull}) {
                counts.on_collective(issue(pid, group, 1000ull * n + static_cast<uint64_t>(r)));
                counts.on_collective(completion(pid, group, 1000ull * n + 5, 1000ull * n + 50 + static_cast<uint64_t>(r)));
            }
        for (uint64_t group : next[static_cast<size_t>(r)]) counts.on_collective(issue(pid, group, 1000ull * (rounds + 1) + static_cast<uint64_t>(r)));
    }
    PublishedCounts out;
    out.since = "12:00:00", out.last_change_ns = counts.last_change_ns();
    out.read_until_ns = out.last_change_ns + CollectiveCounts::kStillNs; // the capture saw them stand still
    nlohmann::json facts = counts.facts();
    for (const auto& [pid, list] : facts.items()) {
        for (const auto& g : list) {
            GroupCount c;
            c.backend = g["backend"], c.last = g["last"], c.last_completed_ns = g["last_completed_ns"];
            c.recent_issues_ns = g["recent_issues_ns"].get<std::vector<uint64_t>>();
            c.hole_until_ns = g["hole_until_ns"];
            out.groups[static_cast<uint32_t>(std::stoul(pid))].push_back(c);
        }
    }
    return out;
}

constexpr uint64_t kLater = 1'000'000'000'000; // the dump, long after the last collective

std::vector<RankStanding> alike(int ranks) {
    std::vector<RankStanding> out;
    for (int r = 0; r < ranks; ++r) out.push_back({r, 100 + static_cast<uint32_t>(r), "node", "all_reduce", "main (t.py:9)", true, 3.0, ""});
    return out;
}

} // namespace

TEST_CASE("a rank that skipped a collective on one group is named, though every stack looks alike") {
    // Ranks 0-2 entered the next all_reduce on the second group (0x2000); rank 3 skipped it and
    // entered the world's (0x1000).
    auto counts = counted(4, 20, {{0x2000}, {0x2000}, {0x2000}, {0x1000}});
    auto ranks = alike(4);
    CHECK(odd_ones_out(ranks).empty()); // the stacks alone say nothing
    std::string lines = judge_group_lags(ranks, counts, kLater);
    // Groups by address: 0x1000 (the world) is group 0.
    CHECK(lines.find("group 0 (gloo: all_reduce): entered after the last one every rank completed: ranks 0-2: 0, rank 3: 1") != std::string::npos);
    CHECK(lines.find("group 1 (gloo: all_reduce): entered after the last one every rank completed: ranks 0-2: 1, rank 3: 0") != std::string::npos);
    CHECK(ranks[3].lag == "one ahead on process group 0 (gloo: all_reduce); one behind on process group 1 (gloo: all_reduce)");
    CHECK(ranks[0].lag.empty());
    CHECK(odd_ones_out(ranks) == std::vector<int>{3});
    CHECK(format_standings(ranks).find("rank 3 waits in all_reduce at main (t.py:9) (for 3 s, asleep) <- the odd one out, one ahead") !=
          std::string::npos);
}

TEST_CASE("ranks in step on every group: no one is named") {
    auto counts = counted(4, 20, {{0x2000}, {0x2000}, {0x2000}, {0x2000}});
    auto ranks = alike(4);
    std::string lines = judge_group_lags(ranks, counts, kLater);
    CHECK(lines.find("no rank behind or ahead") != std::string::npos);
    CHECK(odd_ones_out(ranks).empty());
    // Without a capture's counts, nothing is said.
    auto none = alike(4);
    CHECK(judge_group_lags(none, {}, kLater).empty());
}

TEST_CASE("counts still changing, or groups that do not line up, are not compared") {
    auto counts = counted(4, 20, {{0x2000}, {0x2000}, {0x2000}, {0x1000}});
    auto ranks = alike(4);
    // The dump a second after the last collective: the job still makes progress.
    std::string lines = judge_group_lags(ranks, counts, counts.last_change_ns + 1'000'000'000);
    CHECK(lines.find("not compared: the last collective was 1.0 s ago") != std::string::npos);
    CHECK(ranks[3].lag.empty());
    // A rank that used one group only since the capture began: the groups' order says nothing.
    counts.groups[103].pop_back();
    lines = judge_group_lags(ranks, counts, kLater);
    CHECK(lines.find("not compared: the ranks used different groups since the capture began (ranks 0-2: 2 groups, rank 3: 1 group)") !=
          std::string::npos);
    CHECK(odd_ones_out(ranks).empty());
}

TEST_CASE("counts the capture had not read to their standstill, or could not record whole, are not compared") {
    auto counts = counted(4, 20, {{0x2000}, {0x2000}, {0x2000}, {0x1000}});
    // The capture read its ring late: what it published stood still only by the dump's clock.
    counts.read_until_ns = counts.last_change_ns + 500'000'000;
    CHECK(counts.awaiting_capture(kLater));
    auto ranks = alike(4);
    CHECK(judge_group_lags(ranks, counts, kLater).find("not compared: the capture has not yet read its ring up to where") != std::string::npos);
    CHECK(ranks[3].lag.empty());
    // A wait lost in a full ring would shift one rank's counts: nothing is judged from them.
    counts.read_until_ns = counts.last_change_ns + CollectiveCounts::kStillNs;
    CHECK_FALSE(counts.awaiting_capture(kLater));
    counts.unrecorded = 1;
    CHECK(judge_group_lags(ranks, counts, kLater).find("not compared: the capture's ring had no room for 1 collective events") != std::string::npos);
    CHECK(odd_ones_out(ranks).empty());
}

// A call rank 1's probes could not record (its thread's state or its Work's entry not had), at `t`.
Collective unrecorded_call(uint64_t t) {
    Collective c = issue(101, 0, t);
    c.unrecorded = true;
    return c;
}

TEST_CASE("a call a rank could not record matters only where its hole reaches past the reference point") {
    // Lost at attach (round 1), closed by the rank's next record: the hang is still told.
    auto early = counted(4, 20, {{0x2000}, {0x2000}, {0x2000}, {0x1000}}, {unrecorded_call(1000)});
    CHECK(early.groups[101][0].hole_until_ns == 1011); // closed by the end of its next record (the issue at 1001)
    auto ranks = alike(4);
    std::string lines = judge_group_lags(ranks, early, kLater);
    CHECK(ranks[3].lag == "one ahead on process group 0 (gloo: all_reduce); one behind on process group 1 (gloo: all_reduce)");
    CHECK(odd_ones_out(ranks) == std::vector<int>{3});

    // Lost in the last round, after which rank 1 recorded nothing: its hole is open, nothing is judged.
    auto late = counted(4, 20, {{}, {}, {}, {}}, {});
    CollectiveCounts c;
    c.on_collective(issue(101, 0x2000, 5));
    c.on_collective(unrecorded_call(10));
    CHECK(c.facts()["101"][0]["hole_until_ns"] == UINT64_MAX);
    c.on_collective(issue(101, 0x2000, 20)); // its next record closes it
    CHECK(c.facts()["101"][0]["hole_until_ns"] == 30);
    c.on_collective(unrecorded_call(40));
    c.on_collective(issue(101, 0x2000, 35)); // started before the hole: does not close it
    CHECK(c.facts()["101"][0]["hole_until_ns"] == UINT64_MAX);
    for (auto& g : late.groups[101]) g.hole_until_ns = UINT64_MAX;
    auto holed = alike(4);
    lines = judge_group_lags(holed, late, kLater);
    CHECK(lines.find("group 0 (gloo: all_reduce): not compared: the capture could not record a collective of rank 1 after the last one "
                     "every rank completed") != std::string::npos);
    CHECK(lines.find("no rank behind or ahead of the others on the groups compared") != std::string::npos);
    CHECK(odd_ones_out(holed).empty());
    // A hole that closed before the last collective every rank completed leaves the counts whole.
    for (auto& g : late.groups[101]) g.hole_until_ns = 1000ull * 20;
    holed = alike(4);
    CHECK(judge_group_lags(holed, late, kLater).find("no rank behind or ahead of the others on any group") != std::string::npos);
}

TEST_CASE("the capture publishes its counts once they changed, and at each look while they stand still") {
    CollectiveCounts counts;
    CHECK_FALSE(counts.due_for_publication(10)); // nothing counted yet
    counts.on_collective(issue(7, 0x10, 1000));
    CHECK(counts.due_for_publication(2000));
    CHECK_FALSE(counts.due_for_publication(3000)); // unchanged, not yet still
    uint64_t still = counts.last_change_ns() + CollectiveCounts::kStillNs;
    CHECK(counts.due_for_publication(still));
    CHECK(counts.due_for_publication(still + 1)); // again: how far the capture read, for a dump
    counts.on_collective(issue(7, 0x10, still + 2));
    CHECK(counts.due_for_publication(still + 3));
}

TEST_CASE("DDP's wait on its buckets completes the groups it issued on") {
    CollectiveCounts counts;
    counts.on_collective(issue(7, 0x10, 100));
    counts.on_collective(issue(7, 0x10, 200));
    Collective ddp;
    ddp.pid = 7, ddp.start_ns = 300, ddp.end_ns = 900, ddp.wait = true, ddp.ddp_gradients = true;
    counts.on_collective(ddp);
    nlohmann::json f = counts.facts();
    CHECK(f["7"][0]["completed"] == 2);
    CHECK(f["7"][0]["last_completed_ns"] == 900);
    // A collective without its group (0) is not counted; a process's groups are bounded.
    counts.on_collective(issue(7, 0, 1000));
    for (uint64_t g = 1; g < 200; ++g) counts.on_collective(issue(8, 0x1000 + g, 10 * g));
    CHECK(counts.facts()["8"].size() == CollectiveCounts::kMaxGroups);
    CHECK(counts.facts()["7"][0]["issued"] == 2);
}

TEST_CASE("a process's counts leave the published facts at its exit, and the change is published", "[collectives]") {
    CollectiveCounts counts;
    counts.on_collective(issue(100, 0x1000, 1000));
    counts.on_collective(issue(101, 0x1000, 1001));
    CHECK(counts.due_for_publication(0));
    CHECK_FALSE(counts.due_for_publication(0)); // published; nothing new, not standing still long enough
    counts.process_exited(100); // its PID may soon be another process's: a dump must not read it as that one
    CHECK(counts.due_for_publication(0));
    nlohmann::json facts = counts.facts();
    CHECK_FALSE(facts.contains("100"));
    CHECK(facts.contains("101"));
    counts.process_exited(100); // again (its departure later): no change to publish
    CHECK_FALSE(counts.due_for_publication(0));
}
