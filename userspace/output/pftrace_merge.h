// `gtrace merge`: the .pftrace traces of a job's nodes as one trace. Each input's packets are
// copied with its times moved onto the first node's clock (analyze/clock_alignment.h gives the
// offsets), and with the ids that are only unique within one trace made unique across them:
// packet sequences, track uuids, flow ids, and the PIDs and TIDs where two nodes' collide (then
// the later node's are raised by a multiple of 2^22, above any Linux pid_max). Each process is
// named with its node ("[node-b] rank 1 ...", label host=node-b). Only the first input's clock
// readings are kept, so the merged trace has one time line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "foundation/result.h"

namespace gtrace {

struct MergeInput {
    std::string path;
    std::string node;      // names its processes
    int64_t offset_ns = 0; // added to its times
};

struct MergeSummary {
    uint64_t packets = 0;
    std::vector<uint32_t> pid_shift; // per input: what its PIDs and TIDs were raised by (0: kept)
};

constexpr size_t kMaxMergeInputs = 64;

// Errors: an input that is not a .pftrace gtrace wrote (BadTrace), more than kMaxMergeInputs
// (Usage), the output's (OutputExists, OutputUnwritable, WriteFailed).
Result<MergeSummary> merge_pftraces(const std::vector<MergeInput>& inputs, const std::string& output, bool force,
                                    const std::string& merged_facts_json);

} // namespace gtrace
