#include "collect/agent/offer.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "collect/agent_ring.h"

// In .data: valid (magic, version) from the moment the library is mapped, before any constructor.
extern "C" {
__attribute__((visibility("default"))) gt_agent_mailbox gtrace_agent_mailbox = {GT_MAILBOX_MAGIC, GT_AGENT_VERSION, {}, 0, 0, 0, 0, -1, -1,
                                                                                0, 0, 0, 0, {}, {}};
}

namespace gtrace::agent {
namespace {

gt_agent_mailbox& mailbox() { return gtrace_agent_mailbox; }

// Writes the answer fields under the sequence lock: gtrace retries while answer_gen is odd or
// changes across its read.
template <typename Fill>
void answer(Fill&& fill) {
    gt_agent_mailbox& m = mailbox();
    __atomic_store_n(&m.answer_gen, m.answer_gen + 1, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    fill(m);
    __atomic_store_n(&m.answer_gen, m.answer_gen + 1, __ATOMIC_RELEASE);
}

void set_text(char* dst, size_t size, const std::string& text) { snprintf(dst, size, "%s", text.c_str()); }

uint64_t inode_of(int fd) {
    struct stat st {};
    return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

} // namespace

Request take_request(uint64_t last_seq) {
    gt_agent_mailbox& m = mailbox();
    uint64_t seq = __atomic_load_n(&m.request_seq, __ATOMIC_ACQUIRE);
    if (seq == last_seq) return {};
    char text[GT_MAILBOX_CONFIG_MAX];
    std::memcpy(text, const_cast<const char*>(m.config), sizeof text);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&m.request_seq, __ATOMIC_ACQUIRE) != seq) return {}; // rewritten meanwhile: next round
    text[sizeof text - 1] = 0;
    return {seq, text};
}

Offer& Offer::operator=(Offer&& o) noexcept {
    if (this != &o) {
        close_all();
        ring_ = o.ring_, size_ = o.size_, ring_fd_ = o.ring_fd_, pipe_read_ = o.pipe_read_, pipe_write_ = o.pipe_write_;
        ring_inode_ = o.ring_inode_, pipe_inode_ = o.pipe_inode_;
        o.ring_ = nullptr, o.ring_fd_ = o.pipe_read_ = o.pipe_write_ = -1;
    }
    return *this;
}

Offer Offer::create(uint64_t ring_bytes) {
    Offer o;
    o.size_ = agent_ring_file_size(ring_bytes);
    o.ring_fd_ = memfd_create("gtrace-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int fds[2] = {-1, -1};
    bool ok = o.ring_fd_ >= 0 && ftruncate(o.ring_fd_, static_cast<off_t>(o.size_)) == 0 &&
              // gtrace maps this file: it must never shrink under gtrace's mapping (SIGBUS).
              fcntl(o.ring_fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0 && pipe2(fds, O_CLOEXEC) == 0;
    o.pipe_read_ = fds[0], o.pipe_write_ = fds[1];
    void* p = ok ? mmap(nullptr, o.size_, PROT_READ | PROT_WRITE, MAP_SHARED, o.ring_fd_, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
        int err = errno;
        o.close_all();
        errno = err;
        return o;
    }
    o.ring_ = static_cast<gt_agent_ring*>(p);
    o.ring_->magic = GT_AGENT_MAGIC;
    o.ring_->version = GT_AGENT_VERSION;
    o.ring_->pid = static_cast<uint32_t>(getpid());
    o.ring_->data_bytes = ring_bytes;
    o.ring_->state = GT_AGENT_STARTING;
    o.ring_inode_ = inode_of(o.ring_fd_);
    o.pipe_inode_ = inode_of(o.pipe_read_);
    return o;
}

bool Offer::taken() {
    if (pipe_write_ < 0) return true;
    if (__atomic_load_n(&ring_->owner_pid, __ATOMIC_ACQUIRE) == 0) return false;
    close(pipe_write_);
    pipe_write_ = -1;
    return true;
}

bool Offer::owner_gone(int ms) {
    pollfd p{pipe_read_, POLLIN, 0};
    int n = poll(&p, 1, ms);
    // Nobody ever writes to the pipe: any event is the last write end closing.
    return n > 0 && pipe_write_ < 0;
}

void Offer::publish(const std::string& token, uint64_t seq, uint32_t session) const {
    answer([&](gt_agent_mailbox& m) {
        m.status = GT_MAILBOX_OFFERED;
        m.answered_seq = seq;
        m.ring_fd = ring_fd_;
        m.owner_fd = pipe_write_;
        m.session = session;
        m.ring_inode = ring_inode_;
        m.pipe_inode = pipe_inode_;
        set_text(m.owner_token, sizeof m.owner_token, token);
        m.message[0] = 0;
    });
}

void Offer::forget_in_child() {
    // The mapping stays (harmless); the fds are closed so the child never keeps the parent's
    // pipe open, and the child's mailbox no longer claims an offer.
    if (ring_fd_ >= 0) close(ring_fd_);
    if (pipe_read_ >= 0) close(pipe_read_);
    if (pipe_write_ >= 0) close(pipe_write_);
    ring_ = nullptr;
    ring_fd_ = pipe_read_ = pipe_write_ = -1;
    publish_idle();
}

void Offer::close_all() {
    if (ring_) munmap(ring_, size_);
    if (ring_fd_ >= 0) close(ring_fd_);
    if (pipe_read_ >= 0) close(pipe_read_);
    if (pipe_write_ >= 0) close(pipe_write_);
    ring_ = nullptr;
    ring_fd_ = pipe_read_ = pipe_write_ = -1;
}

void publish_idle() {
    answer([](gt_agent_mailbox& m) {
        m.status = GT_MAILBOX_IDLE;
        m.ring_fd = m.owner_fd = -1;
        m.ring_inode = m.pipe_inode = 0;
        m.owner_token[0] = 0;
    });
}

void publish_refusal(uint64_t seq, const std::string& why) {
    answer([&](gt_agent_mailbox& m) {
        m.status = GT_MAILBOX_REFUSED;
        m.answered_seq = seq;
        m.ring_fd = m.owner_fd = -1;
        set_text(m.message, sizeof m.message, why);
    });
}

void publish_busy(uint64_t seq) {
    answer([&](gt_agent_mailbox& m) { m.answered_seq = seq; });
}

void publish_owned() {
    answer([](gt_agent_mailbox& m) {
        m.status = GT_MAILBOX_OWNED;
        m.owner_fd = -1;
    });
}

} // namespace gtrace::agent
