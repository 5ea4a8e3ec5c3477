// The agent's half of the channel to gtrace (gtrace/agent.h): the mailbox gtrace writes into,
// and the offer the agent answers with — a sealed memfd holding the ring and a pipe whose write
// end gtrace takes, so that the agent learns of gtrace's death from the pipe, not from a PID.
#pragma once
#include <cstdint>
#include <string>

#include "gtrace/agent.h"

extern "C" gt_agent_mailbox gtrace_agent_mailbox;

namespace gtrace::agent {

// A request copied out of the mailbox: its sequence number and text.
struct Request {
    uint64_t seq = 0;
    std::string config;
};

// A new request in the mailbox since `last_seq`, copied consistently; seq 0 when there is none.
Request take_request(uint64_t last_seq);

// One session's ring and owner pipe. Movable, closes everything it holds.
class Offer {
public:
    // Creates the memfd (sealed against shrinking and growing) with an initialized ring header,
    // and the owner pipe. Returns an empty offer (and errno set) on failure.
    static Offer create(uint64_t ring_bytes);
    Offer() = default;
    Offer(Offer&& o) noexcept { *this = std::move(o); }
    Offer& operator=(Offer&& o) noexcept;
    ~Offer() { close_all(); }

    explicit operator bool() const { return ring_ != nullptr; }
    gt_agent_ring* ring() const { return ring_; }
    // Whether gtrace has taken the ring (it sets owner_pid); the agent then drops its copy of
    // the pipe's write end, so the pipe hangs up exactly when gtrace's copy closes.
    bool taken();
    // Waits up to `ms` for the owner pipe; true when gtrace's end is gone (only after taken()).
    bool owner_gone(int ms);
    // Publishes this offer in the mailbox for `token`, answering request `seq`.
    void publish(const std::string& token, uint64_t seq, uint32_t session) const;
    // In a forked child: the offer belongs to the parent; close the child's copies.
    void forget_in_child();
    void close_all();

private:
    gt_agent_ring* ring_ = nullptr;
    size_t size_ = 0;
    int ring_fd_ = -1, pipe_read_ = -1, pipe_write_ = -1;
    uint64_t ring_inode_ = 0, pipe_inode_ = 0;
};

// Mailbox answers that carry no offer.
void publish_idle();
void publish_refusal(uint64_t seq, const std::string& why);
// A request that came while another gtrace owns the session: answered, status unchanged.
void publish_busy(uint64_t seq);
// The session was taken: status OWNED (owner_token keeps the owner's name).
void publish_owned();

} // namespace gtrace::agent
