// NVTX ranges from the agents (the process's NVTX injection in record mode; in attach mode the
// server of the NVTX tables gtrace found, see attach/nvtx_modules.h): each is written as a range
// of its thread (category "nvtx") and goes to the capture script, whose step marker may be one.
// In attach mode every module that uses NVTX gets one outcome: captured from attach on, or why not.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attach/nvtx_modules.h"
#include "capture/capture_script.h"
#include "capture/capture_options.h"
#include "discover/target_files.h"
#include "model/event_stream.h"
#include "gtrace/agent.h"

namespace gtrace {

class NvtxEvents {
public:
    NvtxEvents(const CaptureOptions& options, TargetFiles& target_files, EventConsumer& out, CaptureScript& script)
        : options_(options), target_files_(target_files), out_(out), script_(script) {}

    // Attach mode: the agent's config item naming pid's NVTX tables (";nvtx=ADDR:ADDR", empty
    // when none); modules using NVTX whose table cannot be found are noted at once.
    std::string tables_config(uint32_t pid, const std::vector<Mapping>& maps);
    // GT_GPU_NVTX_RANGE and GT_GPU_NVTX_MODULE records.
    void on_record(uint32_t pid, const gt_gpu_header& h);

    nlohmann::json facts() const;
    void print_summary() const;

private:
    struct Outcome {
        uint32_t pid = 0;
        std::string module;
        bool captured = false;
        std::string why; // not captured: why not
    };
    void note(Outcome o);

    const CaptureOptions& options_;
    TargetFiles& target_files_;
    EventConsumer& out_;
    CaptureScript& script_;
    NvtxModuleScan scan_;
    std::map<std::pair<uint32_t, uint64_t>, std::string> asked_; // (pid, table) → module, until the agent answers
    std::vector<Outcome> outcomes_;
    std::set<std::pair<uint32_t, std::string>> noted_; // (pid, module): one outcome each
    std::set<std::pair<std::string, std::string>> warned_; // (module, why): warned once, live
    uint64_t ranges_ = 0, invalid_ = 0;
};

} // namespace gtrace
