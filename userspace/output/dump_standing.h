// Where each rank of a dumped job stands, and which ranks the others wait for: each rank's main
// thread is put at the innermost collective or synchronization it is in (a torch.distributed
// call, a c10d/gloo/NCCL frame, a CUDA sync, the DataLoader), else its innermost Python frame,
// with the user's line; the ranks are grouped by that, and the ranks outside the largest group
// of ranks waiting in a collective are the odd ones out — what the others wait for. Several
// nodes' dumps (`gtrace dump --json`) merge into one job (`gtrace dump --merge`).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foundation/rank_ranges.h"
#include "foundation/result.h"
#include "output/dump_report.h"

namespace gtrace {

struct RankStanding {
    int rank = 0;
    uint32_t pid = 0;
    std::string node;     // the host that dumped it
    std::string what;     // "all_reduce", "DataLoader.__next__", "cudaStreamSynchronize", or a frame
    std::string where;    // the user's line: "train_step (train.py:120)"
    bool in_collective = false;
    std::optional<double> asleep_s; // its main thread asleep this long when dumped (none: on a CPU)
    // Behind or ahead of the other ranks on a process group ("one behind on process group 1
    // (gloo: all_reduce)"), by a running capture's counts (output/dump_groups.h); empty: in step.
    std::string lag;
};

// The main thread of each rank in `threads` (DumpedThread::is_rank_main), owners "rank N".
std::vector<RankStanding> rank_standings(const std::vector<DumpedThread>& threads, const std::string& node);

// "ranks 0-2 wait in barrier at wait_for_peers (hang.py:25); rank 3 is in hang_here (hang.py:21):
// the others wait for it" — one line per group, the odd ones out marked. Empty without ranks.
std::string format_standings(const std::vector<RankStanding>& ranks);
// The ranks outside the largest group waiting in a collective, and those behind or ahead of the
// others on a process group (none: every rank in one place, in step).
std::vector<int> odd_ones_out(const std::vector<RankStanding>& ranks);

nlohmann::json standings_json(const std::vector<RankStanding>& ranks);
// From a dump's JSON (`standings_json` under "ranks"); a one-line error if it is not one.
Result<std::vector<RankStanding>> standings_from_json(const nlohmann::json& j, const std::string& path);

} // namespace gtrace
