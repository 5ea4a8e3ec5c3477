// Each process's collectives per process group, for `gtrace dump` to tell which rank fell behind
// when every rank's stack looks alike (all in all_reduce at one line): a rank that skipped a
// collective on one group has entered one fewer there than the others. A group is the c10d
// backend object the collective was issued on (ProcessGroupGloo, ...), by address: one process's
// groups are told apart, and ordered by address to match them across ranks (group 0, 1, ...):
// ranks that ran the same code (the same new_group calls, in the same order) allocated their
// groups alike. (An assumption, not a guarantee: the dump says how it matched them.)
//
// Counting from the capture's start would not compare: each rank was entered a little apart, with
// a collective in flight or not. What compares is what each rank issued after the last collective
// of the group every rank completed: a collective completes (its wait returns) only once every
// rank issued it, and no rank issues the next one before it completed this one (gloo, MPI; NCCL's
// wait returns at enqueue). So each group keeps its last completion and its last issues' times,
// and the dump, which sees every rank, counts from the earliest "last completion" (dump_standing.h).
//
// A call or wait the probes could not record (decode/collective.h's `unrecorded`) leaves a hole
// in its thread's counts, from its start until the thread's next record ends (the thread was in
// that call until then). The dump compares a group only where every hole closed before its
// reference point: a record lost at attach does not blind a day-long capture.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "decode/collective.h"
#include "foundation/process_observer.h"

namespace gtrace {

struct GroupActivity {
    std::string backend;          // "gloo"
    std::string last;             // the last collective issued ("all_reduce")
    uint64_t issued = 0, completed = 0; // since the capture began
    uint64_t last_completed_ns = 0;     // CLOCK_MONOTONIC; 0: none seen
    std::deque<uint64_t> recent_issues_ns; // the last kRecentIssues issues' call entries, oldest first
};

class CollectiveCounts final : public ProcessObserver {
public:
    static constexpr uint64_t kStillNs = 2'000'000'000; // no collective for this long: the job hangs
    static constexpr size_t kRecentIssues = 64; // DDP issues one per bucket
    static constexpr size_t kMaxGroups = 64; // per process: a process's own records cannot grow it further

    void on_collective(const Collective& c);
    void process_exec(uint32_t pid) override { forget(pid); }
    // At its exit, not later: its PID may be another process's by the time a dump reads the counts.
    void process_exited(uint32_t pid) override { forget(pid); }
    void process_gone(uint32_t pid) override { forget(pid); }
    // Whether the counts are due to be published, read up to `read_until_ns` (CLOCK_MONOTONIC):
    // after they changed, and at each look once they have stood still for kStillNs — a dump
    // compares only counts the capture itself saw stand still (it may read its ring late).
    bool due_for_publication(uint64_t read_until_ns);
    // When the last collective was issued or completed (CLOCK_MONOTONIC; 0: none yet): a dump
    // compares the counts only once they stand still (the job hangs).
    uint64_t last_change_ns() const { return last_change_ns_; }

    // {"PID": [{"index", "backend", "last", "issued", "completed", "last_completed_ns",
    // "recent_issues_ns", "hole_until_ns"}, ...]}: each process's groups by address (index 0
    // first); hole_until_ns (the process's, on each of its groups): 0 none, UINT64_MAX one open.
    nlohmann::json facts() const;

private:
    struct Holes {
        std::map<uint32_t, uint64_t> open; // tid -> start of its unrecorded call
        uint64_t closed_until_ns = 0;      // every closed hole's end, at the latest
    };
    static constexpr size_t kMaxOpenHoles = 4096; // per process: past that, one open for good

    void forget(uint32_t pid) { changed_ |= (groups_.erase(pid) + holes_.erase(pid)) > 0; }
    bool record_hole(const Collective& c);
    uint64_t hole_until_ns(uint32_t pid) const;

    std::map<uint32_t, std::map<uint64_t, GroupActivity>> groups_; // pid -> backend object -> activity
    std::map<uint32_t, Holes> holes_;
    bool changed_ = false;
    uint64_t last_change_ns_ = 0;
};

} // namespace gtrace
