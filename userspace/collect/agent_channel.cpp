#include "collect/agent_channel.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "collect/agent_ring.h"
#include "discover/proc_tree.h"
#include "discover/process_memory.h"
#include "foundation/elf_symbols.h"
#include "foundation/unique_fd.h"

namespace gtrace {
namespace {

enum class MailboxRead { Ok, Busy, Unreadable, Foreign };

// A consistent copy of pid's mailbox (the agent writes its answer under a sequence lock): Busy
// while the agent is writing it, Foreign for an agent of another gtrace version.
MailboxRead read_mailbox(uint32_t pid, uint64_t address, gt_agent_mailbox& m) {
    for (int attempt = 0; attempt < 3; ++attempt) {
        uint32_t gen_after = 0;
        if (!read_process_memory(static_cast<pid_t>(pid), address, &m, sizeof m)) return MailboxRead::Unreadable;
        if (!read_process_value(static_cast<pid_t>(pid), address + offsetof(gt_agent_mailbox, answer_gen), gen_after))
            return MailboxRead::Unreadable;
        if (m.magic != GT_MAILBOX_MAGIC || m.version != GT_AGENT_VERSION) return MailboxRead::Foreign;
        if (m.answer_gen % 2 == 0 && gen_after == m.answer_gen) {
            m.owner_token[sizeof m.owner_token - 1] = 0;
            m.message[sizeof m.message - 1] = 0;
            return MailboxRead::Ok;
        }
    }
    return MailboxRead::Busy;
}

bool write_process_memory(uint32_t pid, uint64_t address, const void* data, size_t len) {
    iovec local{const_cast<void*>(data), len}, remote{reinterpret_cast<void*>(address), len};
    return process_vm_writev(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(len);
}

// A copy of one of pid's fds (needs the right to ptrace pid, which gtrace has).
int take_fd(int pidfd, int fd) {
    if (fd < 0) return -1;
    return static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
}

std::string own_token() {
    auto st = read_proc_stat(getpid());
    return fmt::format("{}.{}", getpid(), st ? st->start_time_ticks : 0);
}

} // namespace

Result<AgentChannel> AgentChannel::create(const std::string& agent_path) {
    AgentChannel c;
    c.token_ = own_token();
    struct stat st {};
    if (stat(agent_path.c_str(), &st) != 0)
        return make_error(ExitCode::Internal, fmt::format("the agent library {} is missing; rebuild gtrace or pass --no-gpu", agent_path));
    c.agent_dev_ = st.st_dev;
    c.agent_inode_ = st.st_ino;
    std::unordered_set<std::string_view> only = {GT_AGENT_MAILBOX_SYMBOL};
    auto syms = ElfSymbols::load(agent_path, &only);
    const ElfSymbol* mailbox = syms ? (*syms)->find(GT_AGENT_MAILBOX_SYMBOL) : nullptr;
    auto offset = mailbox ? (*syms)->vaddr_to_offset(mailbox->vaddr) : std::nullopt;
    if (!offset || mailbox->size < sizeof(gt_agent_mailbox))
        return make_error(ExitCode::Internal, fmt::format("{} lacks a usable {}; rebuild gtrace", agent_path, GT_AGENT_MAILBOX_SYMBOL));
    c.mailbox_offset_ = *offset;
    return c;
}

AgentChannel::AgentChannel(AgentChannel&& o) noexcept
    : token_(std::move(o.token_)), mailbox_offset_(o.mailbox_offset_), agent_dev_(o.agent_dev_), agent_inode_(o.agent_inode_),
      rings_(std::move(o.rings_)), pending_(std::move(o.pending_)), records_read_(o.records_read_), retired_(o.retired_),
      awaited_(std::move(o.awaited_)), time_self_(o.time_self_) {
    o.rings_.clear();
}

AgentChannel::~AgentChannel() {
    for (auto& [pid, r] : rings_) release(r);
}

void AgentChannel::release(Ring& r) {
    if (r.header) munmap(r.header, r.size);
    if (r.owner_fd >= 0) close(r.owner_fd);
    r.header = nullptr;
    r.owner_fd = -1;
}

std::string AgentChannel::config(const std::string& cupti_override) const {
    std::string c = fmt::format("owner={};ring={}", token_, GT_AGENT_DEFAULT_RING);
    if (!cupti_override.empty()) c += ";cupti=" + cupti_override;
    return c;
}

uint64_t AgentChannel::mailbox_address(const std::vector<Mapping>& maps) const {
    // By device and inode, not by path: in a container the path differs, the file is the same.
    // In the writable data mapping only: while the agent's dlopen is under way, the loader's
    // first, read-only mapping of the whole file covers the mailbox too (readable, with its
    // initial contents) and a request written there fails (EFAULT; seen in CI as "cannot write
    // the agent's mailbox: Bad address", the process then left without GPU data).
    for (const auto& m : maps)
        if (m.dev == agent_dev_ && m.inode == agent_inode_ && mailbox_offset_ >= m.offset &&
            mailbox_offset_ + sizeof(gt_agent_mailbox) <= m.offset + (m.end - m.start) && m.writable && !m.executable)
            return m.start + (mailbox_offset_ - m.offset);
    return 0;
}

Result<AgentAsk> AgentChannel::ask(uint32_t pid, uint64_t mailbox, const std::string& config, bool may_request) {
    gt_agent_mailbox m{};
    switch (read_mailbox(pid, mailbox, m)) {
    case MailboxRead::Ok: break;
    case MailboxRead::Busy: // the agent is answering someone: look again at the next scan
        if (!may_request) awaited_[pid] = mailbox;
        return AgentAsk::Waiting;
    case MailboxRead::Unreadable:
        return make_error(ExitCode::Internal, fmt::format("cannot read the agent's mailbox: {}", strerror(errno)));
    case MailboxRead::Foreign:
        return make_error(ExitCode::Internal, "its agent belongs to another version of gtrace");
    }
    bool ours = token_ == m.owner_token;
    if (m.status == GT_MAILBOX_OFFERED && ours) {
        if (auto r = adopt(pid, m); !r) return r.error();
        awaited_.erase(pid);
        return AgentAsk::Adopted;
    }
    if ((m.status == GT_MAILBOX_OWNED || m.status == GT_MAILBOX_OFFERED) && !ours)
        return make_error(ExitCode::Internal, fmt::format("its GPU side belongs to another gtrace capture (gtrace pid {})",
                                                          std::string(m.owner_token).substr(0, std::string(m.owner_token).find('.'))));
    if (!may_request) { // polled from now on: the offer comes at its CUDA's initialization
        awaited_[pid] = mailbox;
        return AgentAsk::Waiting;
    }
    if (config.size() >= GT_MAILBOX_CONFIG_MAX) return make_error(ExitCode::Internal, "the agent's settings are too long");
    // The text first, then the sequence number that makes the agent read it.
    uint64_t seq = m.request_seq + 1;
    if (!write_process_memory(pid, mailbox + offsetof(gt_agent_mailbox, config), config.c_str(), config.size() + 1) ||
        !write_process_memory(pid, mailbox + offsetof(gt_agent_mailbox, request_seq), &seq, sizeof seq))
        return make_error(ExitCode::Internal, fmt::format("cannot write the agent's mailbox: {}", strerror(errno)));
    pending_[pid] = {mailbox, seq, std::chrono::steady_clock::now()};
    return AgentAsk::Requested;
}

Result<void> AgentChannel::adopt(uint32_t pid, const gt_agent_mailbox& m) {
    auto fail = [&](const std::string& what) {
        return make_error(ExitCode::Internal, fmt::format("the agent's ring is unusable ({})", what));
    };
    Fd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    if (pidfd.get() < 0) return fail(fmt::format("pidfd_open: {}", strerror(errno)));
    Fd ring_fd(take_fd(pidfd.get(), m.ring_fd));
    if (ring_fd.get() < 0)
        return fail(errno == ENOSYS ? "this kernel lacks pidfd_getfd (Linux 5.6+)" : fmt::format("pidfd_getfd: {}", strerror(errno)));
    struct stat st {};
    if (fstat(ring_fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != m.ring_inode) return fail("not the memfd it named");
    // Sealed against shrinking: the process cannot pull pages out from under our mapping.
    int seals = fcntl(ring_fd.get(), F_GET_SEALS);
    uint64_t size = static_cast<uint64_t>(st.st_size), data = size - GT_AGENT_DATA_OFFSET;
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) return fail("not sealed");
    if (size <= GT_AGENT_DATA_OFFSET || data < GT_AGENT_MIN_RING || data > GT_AGENT_MAX_RING || (data & (data - 1))) return fail("size");
    Fd owner_fd(take_fd(pidfd.get(), m.owner_fd));
    struct stat pst {};
    if (owner_fd.get() < 0 || fstat(owner_fd.get(), &pst) != 0 || !S_ISFIFO(pst.st_mode) || pst.st_ino != m.pipe_inode)
        return fail("no owner pipe");
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd.get(), 0);
    if (p == MAP_FAILED) return fail(fmt::format("mmap: {}", strerror(errno)));
    auto* h = static_cast<gt_agent_ring*>(p);
    uint32_t none = 0;
    if (h->magic != GT_AGENT_MAGIC || h->version != GT_AGENT_VERSION || h->data_bytes != data ||
        !__atomic_compare_exchange_n(&h->owner_pid, &none, static_cast<uint32_t>(getpid()), false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        munmap(p, size);
        return fail(none ? "taken by another capture" : "bad header");
    }
    __atomic_store_n(&h->time_self, time_self_ ? 1u : 0u, __ATOMIC_RELEASE);
    rings_[pid] = Ring{h, size, data, owner_fd.release(), 0, 0, 0};
    tids_.forget(pid); // a new session may be a new process under a reused pid: its threads read afresh
    pending_.erase(pid);
    if (on_adopted_) on_adopted_(pid);
    return {};
}

std::vector<uint32_t> AgentChannel::unanswered_requests(int ms) {
    std::vector<uint32_t> late;
    auto now = std::chrono::steady_clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
        if (now - it->second.since > std::chrono::milliseconds(ms)) {
            late.push_back(it->first);
            it = pending_.erase(it);
        } else {
            ++it;
        }
    }
    return late;
}

void AgentChannel::read_ring(uint32_t pid, Ring& r, AgentSink& sink) {
    int64_t offset = __atomic_load_n(&r.header->clock_offset_ns, __ATOMIC_ACQUIRE);
    AgentRingRead got = agent_ring_consume_copy(r.header, r.data_bytes, [&](gt_gpu_header& h) {
        // In a container the agent names threads as its PID namespace does: the host's ids here.
        if (h.type == GT_GPU_CALL && h.size >= sizeof(gt_gpu_call)) {
            auto& c = reinterpret_cast<gt_gpu_call&>(h);
            c.tid = tids_.host_tid(pid, c.tid);
        } else if (h.type == GT_GPU_API && h.size >= sizeof(gt_gpu_api)) {
            auto& a = reinterpret_cast<gt_gpu_api&>(h);
            a.tid = tids_.host_tid(pid, a.tid);
        } else if (h.type == GT_GPU_NVTX_RANGE && h.size >= sizeof(gt_nvtx_range)) {
            auto& n = reinterpret_cast<gt_nvtx_range&>(h);
            n.tid = tids_.host_tid(pid, n.tid);
            n.end_tid = tids_.host_tid(pid, n.end_tid);
        }
        sink.on_gpu_record(pid, h, offset);
    });
    r.records += got.records;
    records_read_ += got.records;
    r.corrupt += got.corrupt;
    // Counters the target can write: a false rise only makes the analysis stop waiting for this
    // process's GPU records.
    const uint64_t lost = __atomic_load_n(&r.header->ring_dropped, __ATOMIC_ACQUIRE) + __atomic_load_n(&r.header->cupti_dropped, __ATOMIC_ACQUIRE);
    if (lost != r.lost_seen) {
        r.lost_seen = lost;
        sink.on_records_lost(pid);
    }
    uint32_t state = __atomic_load_n(&r.header->state, __ATOMIC_ACQUIRE);
    if (state != r.reported_state && state != GT_AGENT_STARTING &&
        (state == GT_AGENT_ACTIVE || state == GT_AGENT_FAILED || state == GT_AGENT_DETACHED)) {
        r.reported_state = state;
        sink.on_agent_state(pid, *r.header);
    }
}

// Launch mode: an agent offers its ring when CUDA initializes, and a process may exit soon after
// (the agent waits for us at exit): look every poll.
void AgentChannel::take_offers() {
    for (auto it = awaited_.begin(); it != awaited_.end();) {
        gt_agent_mailbox m{};
        bool offered = read_mailbox(it->first, it->second, m) == MailboxRead::Ok && m.status == GT_MAILBOX_OFFERED &&
                       token_ == m.owner_token;
        if (offered && !adopt(it->first, m)) offered = false;
        bool gone = kill(static_cast<pid_t>(it->first), 0) != 0;
        it = offered || gone ? awaited_.erase(it) : std::next(it);
    }
}

AgentChannel::Answers AgentChannel::poll(AgentSink& sink) {
    Answers answers;
    auto& refused = answers.refused;
    take_offers();
    for (auto it = pending_.begin(); it != pending_.end();) {
        uint32_t pid = it->first;
        gt_agent_mailbox m{};
        bool answered = read_mailbox(pid, it->second.mailbox, m) == MailboxRead::Ok && m.answered_seq == it->second.seq;
        if (!answered) {
            ++it;
            continue;
        }
        const auto asked_at = it->second.since;
        it = pending_.erase(it);
        if (m.status == GT_MAILBOX_OFFERED && token_ == m.owner_token) {
            if (auto r = adopt(pid, m); !r) refused[pid] = r.error().message;
        } else if (m.status == GT_MAILBOX_REFUSED) {
            refused[pid] = fmt::format("the agent refused: {}", m.message);
        } else if (m.status == GT_MAILBOX_IDLE) {
            // It offered, and withdrew the offer when this gtrace took longer to take it than the
            // agent waits (a busy host; a slow attach of many processes): the caller may ask again.
            answers.withdrawn[pid] = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked_at).count();
        } else {
            refused[pid] = fmt::format("its GPU side belongs to another gtrace capture (gtrace pid {})",
                                       std::string(m.owner_token).substr(0, std::string(m.owner_token).find('.')));
        }
    }
    for (auto& [pid, r] : rings_) read_ring(pid, r, sink);
    return answers;
}

void AgentChannel::detach_all(AgentSink& sink, int timeout_ms) {
    poll(sink);
    for (auto& [pid, r] : rings_) __atomic_store_n(&r.header->control, GT_AGENT_DETACH, __ATOMIC_RELEASE);
    for (int waited = 0;; waited += 20) {
        bool pending = false;
        for (auto& [pid, r] : rings_) {
            read_ring(pid, r, sink);
            uint32_t s = r.header->state;
            // A process that exited cannot detach: what it wrote is all there is.
            if ((s == GT_AGENT_ACTIVE || s == GT_AGENT_STARTING) && kill(static_cast<pid_t>(pid), 0) == 0) pending = true;
        }
        if (!pending || waited >= timeout_ms) break;
        usleep(20000);
    }
}

bool AgentChannel::has_callbacks(uint32_t pid) const {
    auto it = rings_.find(pid);
    return it != rings_.end() && it->second.reported_state == GT_AGENT_ACTIVE &&
           (__atomic_load_n(&it->second.header->flags, __ATOMIC_ACQUIRE) & GT_AGENT_CALLBACKS);
}

void AgentChannel::request_calls(uint32_t pid, const gt_py_layout& layout, uint32_t py_stack_every, uint32_t source) {
    auto it = rings_.find(pid);
    if (it == rings_.end()) return;
    gt_agent_ring* h = it->second.header;
    // The layout before its epoch: the agent takes a layout when the epoch changes.
    gt_py_layout l = layout;
    uint32_t epoch = l.epoch;
    l.epoch = 0;
    __atomic_store_n(&h->py_layout.epoch, 0u, __ATOMIC_RELEASE);
    std::memcpy(&h->py_layout, &l, sizeof l);
    h->py_stack_every = py_stack_every;
    __atomic_store_n(&h->py_layout.epoch, epoch, __ATOMIC_RELEASE);
    __atomic_store_n(&h->capture_calls, source, __ATOMIC_RELEASE);
}

uint64_t AgentChannel::calls_since(uint32_t pid) const {
    auto it = rings_.find(pid);
    if (it == rings_.end() || !(__atomic_load_n(&it->second.header->flags, __ATOMIC_ACQUIRE) & GT_AGENT_CALLS)) return 0;
    uint64_t since = __atomic_load_n(&it->second.header->calls_since_ns, __ATOMIC_ACQUIRE);
    return since ? since : 1;
}

void AgentChannel::retire(uint32_t pid, AgentSink& sink) {
    pending_.erase(pid);
    awaited_.erase(pid);
    auto it = rings_.find(pid);
    if (it != rings_.end()) {
        read_ring(pid, it->second, sink);
        count(retired_, it->second);
        release(it->second);
        rings_.erase(it);
    }
    tids_.forget(pid);
}

void AgentChannel::count(AgentTotals& t, const Ring& r) {
    ++t.agents;
    t.active += r.reported_state == GT_AGENT_ACTIVE || r.reported_state == GT_AGENT_DETACHED;
    t.failed += r.reported_state == GT_AGENT_FAILED;
    t.ring_dropped += r.header->ring_dropped;
    t.cupti_dropped += r.header->cupti_dropped;
    t.buffers_refused += r.header->buffers_refused;
    t.trimmed_at_stop += r.header->ops_trimmed_at_stop;
    t.calls_from_records += (__atomic_load_n(&r.header->flags, __ATOMIC_ACQUIRE) & GT_AGENT_CALL_RECORDS) != 0;
    t.call_stacks_missed += r.header->call_stacks_missed;
    t.self_callbacks += __atomic_load_n(&r.header->self_callbacks, __ATOMIC_RELAXED);
    t.self_callback_ns += __atomic_load_n(&r.header->self_callback_ns, __ATOMIC_RELAXED);
    t.self_py_walks += __atomic_load_n(&r.header->self_py_walks, __ATOMIC_RELAXED);
    t.self_py_walk_ns += __atomic_load_n(&r.header->self_py_walk_ns, __ATOMIC_RELAXED);
    t.records += r.records;
    t.ring_corrupt += r.corrupt;
}

AgentTotals AgentChannel::totals() const {
    AgentTotals t = retired_;
    for (const auto& [pid, r] : rings_) count(t, r);
    return t;
}

} // namespace gtrace
