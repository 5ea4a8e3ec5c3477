// gtrace's end of the channel to the agents (gtrace/agent.h): requests go into each agent's
// mailbox with process_vm_writev; the ring and owner pipe an agent offers are taken with
// pidfd_getfd, checked (a sealed regular memfd, a pipe, the inodes it named) and mapped.
// Nothing is created in the file system. Polled from the capture loop: answers adopted, records
// handed to the sink, state changes (started, failed, detached) reported once each.
//
// A traced process may be hostile: everything read from its mailbox and ring is checked before
// use, and each record is copied out of the shared ring before it is looked at.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "discover/pid_namespace.h"
#include "discover/proc_maps.h"
#include "foundation/result.h"
#include "gtrace/agent.h"

namespace gtrace {

class AgentSink {
public:
    virtual ~AgentSink() = default;
    virtual void on_gpu_record(uint32_t pid, const gt_gpu_header& h, int64_t clock_offset_ns) = 0;
    // The agent of pid reached `state` (ACTIVE, FAILED or DETACHED); `ring` has its message.
    virtual void on_agent_state(uint32_t pid, const gt_agent_ring& ring) = 0;
    // The agent of pid counted records lost (its ring full, CUPTI's buffers) since the last time.
    virtual void on_records_lost(uint32_t /*pid*/) {}
};

struct AgentTotals {
    uint64_t agents = 0, active = 0, failed = 0;
    uint64_t ring_dropped = 0, cupti_dropped = 0, buffers_refused = 0;
    uint64_t records = 0;
    uint64_t ring_corrupt = 0; // ring positions or records that made no sense (skipped)
    uint64_t trimmed_at_stop = 0; // GPU ops of calls in flight at the stop, left out by the agents
    uint64_t calls_from_records = 0; // agents taking the calls from CUPTI's API records
    uint64_t call_stacks_missed = 0; // calls from API records recorded without their walked stack
    // The agents' own time on the job's threads (AgentChannel::time_agents_self).
    uint64_t self_callbacks = 0, self_callback_ns = 0, self_py_walks = 0, self_py_walk_ns = 0;
};

// What asking an agent gave.
enum class AgentAsk {
    Requested, // the request is in its mailbox; poll() takes the answer
    Adopted,   // it had offered us a session (launch mode): taken
    Waiting,   // launch mode: its CUDA has not started the agent yet
};

class AgentChannel {
public:
    // `agent_path`: the agent library gtrace loads (its mailbox symbol is looked up once).
    static Result<AgentChannel> create(const std::string& agent_path);
    AgentChannel(AgentChannel&& o) noexcept;
    AgentChannel(const AgentChannel&) = delete;
    ~AgentChannel(); // unmaps the rings and closes the owner pipes: every agent goes dormant

    // The agent's settings (the mailbox request, or GTRACE_AGENT_CONFIG in launch mode).
    std::string config(const std::string& cupti_override) const;
    // Who this capture is, as agents name their owner ("PID.STARTTIME").
    const std::string& owner_token() const { return token_; }

    // The address of the agent's mailbox in a process with these mappings; 0: not mapped.
    uint64_t mailbox_address(const std::vector<Mapping>& maps) const;
    // Asks pid's agent for a session (`may_request`; else only takes one offered to us). An
    // error says why not, in words for the user (e.g. another capture owns its GPU side).
    Result<AgentAsk> ask(uint32_t pid, uint64_t mailbox, const std::string& config, bool may_request);
    // Requests older than `ms` that no agent answered (pids), each reported once.
    std::vector<uint32_t> unanswered_requests(int ms);

    // What a poll found besides records: refusals (pid → reason, in words for the user), and
    // offers the agent withdrew because this gtrace took longer than it waits (pid → seconds
    // from the request to the answer): asking again may get one.
    struct Answers {
        std::map<uint32_t, std::string> refused;
        std::map<uint32_t, double> withdrawn;
    };
    // Asks every agent adopted from now on to time its own callbacks and walks (--bpf-stats).
    void time_agents_self(bool on) { time_self_ = on; }
    // Takes answered offers, reads every ring.
    Answers poll(AgentSink& sink);
    // pid exited: its ring read a last time (what the agent wrote before the end), its counts
    // kept for totals(), the ring unmapped and its pipe closed; nothing of it is kept.
    void retire(uint32_t pid, AgentSink& sink);
    // Asks every active agent to flush and detach, and reads until all did or `timeout_ms`.
    void detach_all(AgentSink& sink, int timeout_ms);
    AgentTotals totals() const;
    // Records read from every ring so far (the capture loop polls sooner while they flow).
    uint64_t records_read() const { return records_read_; }
    bool has_agent(uint32_t pid) const { return rings_.contains(pid); }
    // Whether gtrace asked pid's agent for a session that it has not answered yet.
    bool has_pending_request(uint32_t pid) const { return pending_.contains(pid); }
    // Whether pid's agent holds CUPTI's callbacks (and so can record the process's calls).
    bool has_callbacks(uint32_t pid) const;
    // Asks pid's agent to record its API calls, walking Python stacks with `layout` (epoch 0:
    // none yet; a later call updates it). py_stack_every: 0 no stacks, 1 every call.
    // source: enum gt_call_source (callbacks or API records).
    void request_calls(uint32_t pid, const gt_py_layout& layout, uint32_t py_stack_every, uint32_t source);
    // CLOCK_MONOTONIC ns since which pid's agent records its calls; 0: it does not (yet).
    uint64_t calls_since(uint32_t pid) const;
    // Called as each ring becomes ours, before its agent begins the session (attach mode): what
    // is asked in the ring now (request_calls) holds from the session's first record.
    void set_on_adopted(std::function<void(uint32_t pid)> f) { on_adopted_ = std::move(f); }

private:
    AgentChannel() = default;
    struct Ring {
        gt_agent_ring* header = nullptr;
        size_t size = 0;         // of the mapping
        uint64_t data_bytes = 0; // from the memfd's size, never from the header
        int owner_fd = -1;       // our copy of the agent's pipe write end
        uint32_t reported_state = 0;
        uint64_t records = 0, corrupt = 0;
        uint64_t lost_seen = 0; // the header's ring_dropped + cupti_dropped when last read
    };
    struct Pending {
        uint64_t mailbox = 0, seq = 0;
        std::chrono::steady_clock::time_point since;
    };
    Result<void> adopt(uint32_t pid, const gt_agent_mailbox& m);
    void take_offers();
    void read_ring(uint32_t pid, Ring& r, AgentSink& sink);
    void release(Ring& r);
    static void count(AgentTotals& t, const Ring& r);

    std::string token_;
    uint64_t mailbox_offset_ = 0; // file offset of gtrace_agent_mailbox in the agent library
    uint64_t agent_dev_ = 0, agent_inode_ = 0;
    std::map<uint32_t, Ring> rings_;
    std::map<uint32_t, Pending> pending_;
    uint64_t records_read_ = 0;
    AgentTotals retired_; // the rings of processes that exited
    std::map<uint32_t, uint64_t> awaited_; // launch mode: pid → mailbox of an agent not offering yet
    NamespaceTids tids_; // agents in containers name threads by their namespace's ids
    std::function<void(uint32_t)> on_adopted_;
    bool time_self_ = false;
};

} // namespace gtrace
