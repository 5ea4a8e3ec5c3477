// gtrace's end of the agents' rings: one directory per capture (/dev/shm/gtrace-PID) where each
// process's agent creates its ring file. Polled from the capture loop: new rings are mapped,
// records handed to the sink, state changes (started, failed, detached) reported once each.
#pragma once
#include <cstdint>
#include <chrono>
#include <map>
#include <vector>
#include <string>

#include "foundation/result.h"
#include "gtrace/agent.h"

namespace gtrace {

class AgentSink {
public:
    virtual ~AgentSink() = default;
    virtual void on_gpu_record(uint32_t pid, const gt_gpu_header& h, int64_t clock_offset_ns) = 0;
    // The agent of pid reached `state` (ACTIVE, FAILED or DETACHED); `ring` has its message.
    virtual void on_agent_state(uint32_t pid, const gt_agent_ring& ring) = 0;
};

struct AgentTotals {
    uint64_t agents = 0, active = 0, failed = 0;
    uint64_t ring_dropped = 0, cupti_dropped = 0, buffers_refused = 0;
    uint64_t records = 0;
};

class AgentChannel {
public:
    // Creates the directory (removing those of earlier gtrace runs that died).
    static Result<AgentChannel> create();
    AgentChannel(AgentChannel&& o) noexcept;
    AgentChannel(const AgentChannel&) = delete;
    ~AgentChannel(); // unmaps the rings and removes the directory

    // The string gtrace_agent_start() / GTRACE_AGENT_CONFIG takes.
    std::string config(const std::string& cupti_override) const;
    const std::string& dir() const { return dir_; }

    // Asks pid's agent to start (the file its constructor, or its dormant thread, looks for).
    Result<void> request(uint32_t pid, const std::string& config);
    // Requests older than `ms` that no agent answered (pids), each reported once.
    std::vector<uint32_t> unanswered_requests(int ms);

    void poll(AgentSink& sink);
    // Asks every active agent to flush and detach, and reads until all did or `timeout_ms`.
    void detach_all(AgentSink& sink, int timeout_ms);
    AgentTotals totals() const;
    bool has_agent(uint32_t pid) const { return rings_.contains(pid); }

private:
    AgentChannel() = default;
    struct Ring {
        gt_agent_ring* header = nullptr;
        size_t size = 0;
        uint32_t reported_state = 0;
        uint64_t records = 0;
    };
    void open_new_rings();
    std::string request_path(uint32_t pid) const;
    void read_ring(uint32_t pid, Ring& r, AgentSink& sink);

    std::string dir_;
    std::map<uint32_t, Ring> rings_;
    std::map<uint32_t, std::chrono::steady_clock::time_point> requests_;
};

} // namespace gtrace
