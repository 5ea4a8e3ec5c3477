// The verdicts of a report: per process, what bounds its step (from the step breakdown and the
// launch figures), and for the job, a straggler rank or the processes' common verdict. The
// thresholds, remedies and evidence text live here; output/ only renders them.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "analyze/step_analysis.h"

namespace gtrace {

// A cause dominates a step when it takes at least kDominantShare of it, or at least
// kDominantLead times every other part (Other included: unattributed time may hide the real
// cause). A step without a dominant cause is `mixed`.
constexpr double kDominantShare = 0.5;
constexpr double kDominantLead = 2.0;

// Sets verdict, leading, evidence and causes of a process with steps (none without steps:
// evidence then says why). Verdicts: communication, copy, gpu, data_loading, launch_overhead,
// cpu, mixed (no dominant cause: `leading` names the verdict the figures lean to — the largest
// identified cause — and `causes` ranks all the parts).
void judge_process(ProcessAnalysis& p, const std::string& step_marker);

// What usually helps with a verdict ("" for none).
std::string remedy(const std::string& verdict, const std::string& leading = "");

struct Straggler {
    int rank = 0;
    double kernel_ms = 0, others_ms = 0; // kernel time per step: its, and the other ranks' median
    // Measured in collectives (else judged on kernel time): the rank that waits longest for it,
    // in which collective most, and how long per step in all.
    std::string collective;
    int waiting_rank = -1;
    double wait_ms = 0;
    // Inferred, not matched: summaries hold no collective times to match across nodes, so the
    // rank that spends least of its step in collectives is taken for the one the others wait for.
    bool inferred = false;
    double in_collectives_ms = 0, others_in_collectives_ms = 0; // then: its time in collectives per step, the others' median
};

struct JobVerdict {
    std::string verdict; // straggler, or the verdict of the process that bounds the job; "" when none has steps
    std::string leading; // with `mixed`: the verdict the figures lean to
    std::string evidence;
    std::string remedy;
    std::vector<std::pair<Category, double>> causes; // that process's step parts ranked by share
    std::optional<Straggler> straggler;
    // The straggler's host had its CPUs contended (PSI, >= kContendedCpuShare of the capture): the
    // lag may be the host's, not the rank's own work. The share, when so.
    std::optional<double> host_cpu_pressure;
    // With ranks: the rank that waits least for the others, whose verdict is the job's (when no straggler).
    std::optional<int> bounding_rank;
};

// Judges the job: a straggler when the other ranks wait for one in collectives (measured: a tenth
// of a rank's step or more, while that one waits under half as long), or when one rank's kernel
// time per step is well above the other ranks' (then every other rank's verdict becomes
// `straggler`, its evidence saying whom it waits for) — unless every rank's own verdict is the
// straggler's and that cause takes more of the waiting rank's step than the wait, or is data
// loading (all ranks wait for their DataLoaders, one longer each step): then that cause is the
// job's, the wait said beside it. Otherwise, ranks step in lockstep, so the rank that waits least for the others (least
// Other and Communication) bounds the job: its verdict is the job's. A job without ranks gets
// its processes' most common verdict — a single process's own.
// `matching`: WithinNodes for ranks merged from per-node summaries — a wait for a rank on another
// node is attributed to no one there, so when no matched wait names a straggler, the rank that
// spends least of its step in collectives, under half the others' median while theirs is a tenth
// of their step or more, is taken for it (every collective waits for the last rank to arrive).
enum class CollectiveMatching { Job, WithinNodes };
JobVerdict judge_job(std::vector<ProcessAnalysis>& processes, CollectiveMatching matching = CollectiveMatching::Job);

} // namespace gtrace
