#include "collect/agent_channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "collect/agent_ring.h"

namespace gtrace {
namespace {

constexpr const char* kShmRoot = "/dev/shm";
constexpr const char* kDirPrefix = "gtrace-";

// Directories left by a gtrace that was killed: their agents went dormant and unlinked their
// rings; the directory itself is ours to remove.
void remove_stale_dirs() {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(kShmRoot, ec)) {
        std::string name = entry.path().filename().string();
        if (!name.starts_with(kDirPrefix)) continue;
        int owner = atoi(name.c_str() + strlen(kDirPrefix));
        if (owner > 0 && kill(owner, 0) != 0 && errno == ESRCH) std::filesystem::remove_all(entry.path(), ec);
    }
}

} // namespace

Result<AgentChannel> AgentChannel::create() {
    remove_stale_dirs();
    AgentChannel c;
    c.dir_ = fmt::format("{}/{}{}", kShmRoot, kDirPrefix, getpid());
    std::error_code ec;
    std::filesystem::remove_all(c.dir_, ec);
    if (mkdir(c.dir_.c_str(), 0700) != 0)
        return make_error(ExitCode::Internal, fmt::format("cannot create {}: {}; is /dev/shm mounted?", c.dir_, strerror(errno)));
    // Agents run as the target's user: they may create files here, not list or remove others'.
    chmod(c.dir_.c_str(), 01733);
    return c;
}

AgentChannel::AgentChannel(AgentChannel&& o) noexcept : dir_(std::move(o.dir_)), rings_(std::move(o.rings_)) {
    o.dir_.clear();
    o.rings_.clear();
}

AgentChannel::~AgentChannel() {
    for (auto& [pid, r] : rings_) munmap(r.header, r.size);
    if (!dir_.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
}

std::string AgentChannel::config(const std::string& cupti_override) const {
    std::string c = fmt::format("dir={};owner={}", dir_, getpid());
    if (!cupti_override.empty()) c += ";cupti=" + cupti_override;
    return c;
}

std::string AgentChannel::request_path(uint32_t pid) const { return fmt::format("{}/request-{}", dir_, pid); }

Result<void> AgentChannel::request(uint32_t pid, const std::string& config) {
    std::string path = request_path(pid), temp = path + ".new";
    FILE* f = fopen(temp.c_str(), "w");
    if (!f) return make_error(ExitCode::Internal, fmt::format("cannot write {}: {}", temp, strerror(errno)));
    fputs(config.c_str(), f);
    fchmod(fileno(f), 0644); // the agent runs as the target's user
    bool ok = fclose(f) == 0 && rename(temp.c_str(), path.c_str()) == 0;
    if (!ok) return make_error(ExitCode::Internal, fmt::format("cannot write {}: {}", path, strerror(errno)));
    requests_[pid] = std::chrono::steady_clock::now();
    return {};
}

std::vector<uint32_t> AgentChannel::unanswered_requests(int ms) {
    std::vector<uint32_t> late;
    auto now = std::chrono::steady_clock::now();
    for (auto it = requests_.begin(); it != requests_.end();) {
        if (now - it->second > std::chrono::milliseconds(ms)) {
            late.push_back(it->first);
            unlink(request_path(it->first).c_str());
            it = requests_.erase(it);
        } else {
            ++it;
        }
    }
    return late;
}

void AgentChannel::open_new_rings() {
    DIR* d = opendir(dir_.c_str());
    if (!d) return;
    while (dirent* e = readdir(d)) {
        unsigned pid = 0;
        char tail[8] = {};
        if (sscanf(e->d_name, "agent-%u.%7s", &pid, tail) != 2 || strcmp(tail, "ring") != 0) continue;
        if (rings_.contains(pid)) continue;
        std::string path = dir_ + "/" + e->d_name;
        int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st {};
        void* p = MAP_FAILED;
        if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) > GT_AGENT_DATA_OFFSET)
            p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p == MAP_FAILED) continue;
        auto* h = static_cast<gt_agent_ring*>(p);
        if (h->magic != GT_AGENT_MAGIC || h->version != GT_AGENT_VERSION ||
            agent_ring_file_size(h->data_bytes) != static_cast<size_t>(st.st_size)) {
            munmap(p, static_cast<size_t>(st.st_size));
            continue;
        }
        rings_[pid] = Ring{h, static_cast<size_t>(st.st_size), 0, 0};
        if (requests_.erase(pid)) unlink(request_path(pid).c_str()); // answered
    }
    closedir(d);
}

void AgentChannel::read_ring(uint32_t pid, Ring& r, AgentSink& sink) {
    int64_t offset = __atomic_load_n(&r.header->clock_offset_ns, __ATOMIC_ACQUIRE);
    r.records += agent_ring_consume(r.header, [&](const gt_gpu_header& h) { sink.on_gpu_record(pid, h, offset); });
    uint32_t state = __atomic_load_n(&r.header->state, __ATOMIC_ACQUIRE);
    if (state != r.reported_state && state != GT_AGENT_STARTING) {
        r.reported_state = state;
        sink.on_agent_state(pid, *r.header);
    }
}

void AgentChannel::poll(AgentSink& sink) {
    open_new_rings();
    for (auto& [pid, r] : rings_) read_ring(pid, r, sink);
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

AgentTotals AgentChannel::totals() const {
    AgentTotals t;
    for (const auto& [pid, r] : rings_) {
        ++t.agents;
        t.active += r.reported_state == GT_AGENT_ACTIVE || r.reported_state == GT_AGENT_DETACHED;
        t.failed += r.reported_state == GT_AGENT_FAILED;
        t.ring_dropped += r.header->ring_dropped;
        t.cupti_dropped += r.header->cupti_dropped;
        t.buffers_refused += r.header->buffers_refused;
        t.records += r.records;
    }
    return t;
}

} // namespace gtrace
