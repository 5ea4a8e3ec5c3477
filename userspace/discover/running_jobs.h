// The jobs gtrace can attach to, found in /proc (gtrace ps): torchrun agents however they were
// started, their rank workers (RANK in their environment), and any other process that has a CUDA
// library mapped. Every /proc file read here belongs to a process that may be hostile: reads are
// bounded, a process that exits or is replaced meanwhile is dropped, and of its environment only
// RANK, LOCAL_RANK and WORLD_SIZE are kept.
#pragma once
#include <string>
#include <vector>

#include "discover/proc_maps.h"
#include "discover/proc_tree.h"

namespace gtrace {

enum class JobRole { Agent, Rank, Cuda };

struct JobProcess {
    int pid = 0;
    int ppid = 0;
    JobRole role = JobRole::Cuda;
    int job = 0;        // the torchrun agent's PID, for the agent and its ranks; 0 otherwise
    RankEnv ranks;      // the rank's RANK, LOCAL_RANK, WORLD_SIZE
    bool cuda = false;  // a CUDA runtime or driver library is mapped
    std::vector<std::string> argv;
};

// Listed job by job: each agent followed by its ranks (in rank order), then ranks without an
// agent (grouped by parent), then the other CUDA processes. A process under a listed one (a
// rank's DataLoader workers, a CUDA process's forked children) is not listed: attaching to the
// listed one traces it. `self` (gtrace's own PID) is never listed.
std::vector<JobProcess> find_jobs(int self);

// Whether argv starts a torchrun agent: `torchrun ...`, `python .../torchrun ...` (its console
// script run through the interpreter), `python [-flags] -m torch.distributed.run|launch ...`.
bool is_torchrun_argv(const std::vector<std::string>& argv);

// Whether a process with these mappings has a CUDA runtime or driver library loaded.
bool maps_cuda_library(const std::vector<Mapping>& maps);

} // namespace gtrace
