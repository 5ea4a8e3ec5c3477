// libgtrace_agent.so: loaded into a traced process by gtrace (a borrowed thread's dlopen; the
// constructor then finds gtrace's request file) or by CUDA at initialization
// (CUDA_INJECTION64_PATH → InitializeInjection, launch mode). It runs CUPTI and ships GPU
// records to gtrace through a shared-memory ring, and never blocks the application. Its own
// thread flushes, watches gtrace, and detaches on request — or within a second of gtrace dying
// — and then stays dormant, looking for the next gtrace's request four times a second.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "collect/agent/cupti_session.h"
#include "collect/agent_ring.h"

namespace gtrace::agent {
namespace {

constexpr int kWatchMs = 200;        // how often the control thread wakes
constexpr int kFlushEveryMs = 500;   // records reach gtrace within about this
constexpr int kClockEveryMs = 5000;  // re-measure the clock offset
constexpr int kDormantPollMs = 250;  // how often a dormant agent looks for a request

struct Config {
    std::string dir;
    int owner = 0;
    uint64_t ring_bytes = GT_AGENT_DEFAULT_RING;
    SessionConfig session;
};

Config parse(const char* text) {
    Config c;
    std::string s = text ? text : "";
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t end = s.find(';', pos);
        if (end == std::string::npos) end = s.size();
        std::string item = s.substr(pos, end - pos);
        pos = end + 1;
        size_t eq = item.find('=');
        if (eq == std::string::npos) continue;
        std::string key = item.substr(0, eq), value = item.substr(eq + 1);
        if (key == "dir") c.dir = value;
        else if (key == "owner") c.owner = atoi(value.c_str());
        else if (key == "ring") c.ring_bytes = strtoull(value.c_str(), nullptr, 10);
        else if (key == "callbacks") c.session.callbacks = value != "0";
        else if (key == "cupti") {
            for (size_t p = 0; p <= value.size();) {
                size_t colon = value.find(':', p);
                if (colon == std::string::npos) colon = value.size();
                if (colon > p) c.session.cupti_candidates.push_back(value.substr(p, colon - p));
                p = colon + 1;
            }
        }
    }
    if (c.ring_bytes < 65536 || (c.ring_bytes & (c.ring_bytes - 1))) c.ring_bytes = GT_AGENT_DEFAULT_RING;
    return c;
}

struct Agent {
    std::mutex mutex;
    bool active = false;          // a session is running (or starting) for an owner
    bool thread_started = false;
    pthread_t thread{};
    Config config;
    gt_agent_ring* ring = nullptr;
    size_t ring_size = 0;
    std::string ring_path;
    int owner_fd = -1;            // pidfd of gtrace: readable once gtrace has exited
    std::string last_request;     // identity of the request file acted on last
};

// Constructed on first use: the load-time constructor below may run before this file's static
// initializers would.
Agent& the_agent() {
    static Agent a;
    return a;
}

gt_agent_ring* create_ring(const Config& c, std::string* path) {
    *path = c.dir + "/agent-" + std::to_string(getpid()) + ".ring";
    std::string temp = *path + ".new";
    int fd = open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return nullptr;
    size_t size = agent_ring_file_size(c.ring_bytes);
    void* p = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(size)) == 0) p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        unlink(temp.c_str());
        return nullptr;
    }
    auto* r = static_cast<gt_agent_ring*>(p);
    r->magic = GT_AGENT_MAGIC;
    r->version = GT_AGENT_VERSION;
    r->pid = static_cast<uint32_t>(getpid());
    r->data_bytes = c.ring_bytes;
    r->state = GT_AGENT_STARTING;
    rename(temp.c_str(), path->c_str()); // gtrace only ever sees an initialized header
    return r;
}

// Lets go of the ring and the owner (under the mutex).
void release(Agent& a, uint32_t final_state, bool unlink_ring) {
    __atomic_store_n(&a.ring->state, final_state, __ATOMIC_RELEASE);
    munmap(a.ring, a.ring_size);
    a.ring = nullptr;
    if (unlink_ring) unlink(a.ring_path.c_str()); // nobody will read it
    if (a.owner_fd >= 0) close(a.owner_fd);
    a.owner_fd = -1;
    a.active = false;
}

// Starts CUPTI; on failure leaves the reason in the ring and lets go of it (under the mutex).
bool begin_session(Agent& a) {
    std::string error = start_session(a.ring, a.config.session);
    if (error.empty()) {
        __atomic_store_n(&a.ring->state, GT_AGENT_ACTIVE, __ATOMIC_RELEASE);
        return true;
    }
    snprintf(a.ring->message, sizeof a.ring->message, "%s", error.c_str());
    release(a, GT_AGENT_FAILED, false);
    return false;
}

// gtrace has exited, or is exiting: a killed gtrace takes seconds to finish exiting (the kernel
// removes its uprobes one by one), and the agent must not wait for that.
bool owner_gone(Agent& a) {
    if (a.owner_fd >= 0) {
        pollfd p{a.owner_fd, POLLIN, 0};
        if (poll(&p, 1, 0) > 0) return true;
    } else if (kill(a.config.owner, 0) != 0 && errno == ESRCH) {
        return true;
    }
    constexpr unsigned long kPfExiting = 0x4; // linux/sched.h
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", a.config.owner);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false; // another PID namespace: the pidfd decides
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return true;
    buf[n] = 0;
    const char* p = strrchr(buf, ')'); // fields after the command name: state ppid pgrp session tty tpgid flags
    unsigned long flags = 0;
    char state = 0;
    if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2) return false;
    return state == 'Z' || state == 'X' || (flags & kPfExiting);
}

int start(const std::string& config_text, bool from_injection);

// A request is /dev/shm/gtrace-OWNER/request-PID holding the config; each file is acted on once.
void check_requests() {
    std::string mine = "/request-" + std::to_string(getpid());
    DIR* d = opendir("/dev/shm");
    if (!d) return;
    std::string found, identity;
    while (dirent* e = readdir(d)) {
        if (strncmp(e->d_name, "gtrace-", 7) != 0) continue;
        std::string path = std::string("/dev/shm/") + e->d_name + mine;
        struct stat st {};
        if (stat(path.c_str(), &st) != 0) continue;
        identity = path + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_mtim.tv_nsec);
        if (identity != the_agent().last_request) found = path;
        break;
    }
    closedir(d);
    if (found.empty()) return;
    FILE* f = fopen(found.c_str(), "r");
    if (!f) return;
    char buf[4096] = {};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    {
        std::lock_guard lock(the_agent().mutex);
        the_agent().last_request = identity;
    }
    start(std::string(buf, n), false);
}

// Runs one active session until gtrace asks to detach or dies.
void serve(Agent& a) {
    {
        std::lock_guard lock(a.mutex);
        if (a.ring->state == GT_AGENT_STARTING && !begin_session(a)) return;
    }
    bool owner_died = false;
    int since_flush = 0, since_clock = 0;
    for (;;) {
        if (a.owner_fd >= 0) {
            pollfd p{a.owner_fd, POLLIN, 0};
            poll(&p, 1, kWatchMs);
        } else {
            usleep(kWatchMs * 1000);
        }
        if (owner_gone(a)) {
            owner_died = true;
            break;
        }
        if (__atomic_load_n(&a.ring->control, __ATOMIC_ACQUIRE) == GT_AGENT_DETACH) break;
        if ((since_flush += kWatchMs) >= kFlushEveryMs) {
            since_flush = 0;
            flush_session(false);
        }
        if ((since_clock += kWatchMs) >= kClockEveryMs) {
            since_clock = 0;
            measure_clock();
        }
    }
    stop_session();
    std::lock_guard lock(a.mutex);
    release(a, GT_AGENT_DETACHED, owner_died);
}

void* agent_loop(void*) {
    Agent& a = the_agent();
    for (;;) {
        bool active;
        {
            std::lock_guard lock(a.mutex);
            active = a.active;
        }
        if (active) serve(a);
        else {
            usleep(kDormantPollMs * 1000);
            check_requests();
        }
    }
    return nullptr;
}

void ensure_thread(Agent& a) {
    if (a.thread_started) return;
    sigset_t all, old;
    sigfillset(&all); // the agent's thread must not take the application's signals
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&a.thread, nullptr, agent_loop, nullptr) == 0) {
        pthread_detach(a.thread);
        pthread_setname_np(a.thread, "gtrace-agent");
        a.thread_started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void in_forked_child() {
    Agent& a = the_agent();
    forget_ring_in_child();
    a.thread_started = false; // the agent's thread was not copied
    a.active = false;
    a.ring = nullptr;
    if (a.owner_fd >= 0) close(a.owner_fd);
    a.owner_fd = -1;
}

// 0: started; 1: already running for this owner; negative: failed (the ring says why when it exists).
int start(const std::string& config_text, bool from_injection) {
    Agent& a = the_agent();
    std::lock_guard lock(a.mutex);
    Config c = parse(config_text.c_str());
    if (c.dir.empty() || c.owner <= 0) return -EINVAL;
    if (a.active) return a.config.owner == c.owner ? 1 : -EBUSY;
    a.config = c;
    a.ring = create_ring(c, &a.ring_path);
    if (!a.ring) return -errno;
    a.ring_size = agent_ring_file_size(c.ring_bytes);
    a.owner_fd = static_cast<int>(syscall(SYS_pidfd_open, c.owner, 0));
    if (!from_injection) __atomic_or_fetch(&a.ring->flags, GT_AGENT_LATE_ATTACH, __ATOMIC_RELEASE);
    a.active = true;
    // At CUDA initialization CUPTI must be on before the first kernel: start it here. In a
    // running process this is a borrowed thread: keep it short, the agent's thread starts CUPTI.
    if (from_injection && !begin_session(a)) return -ENOENT;
    ensure_thread(a);
    return 0;
}

__attribute__((constructor)) void on_load() {
    pthread_atfork(nullptr, nullptr, in_forked_child);
    {
        std::lock_guard lock(the_agent().mutex);
        ensure_thread(the_agent());
    }
    check_requests(); // loaded by gtrace: its request is waiting
}

// At exit the records still in CUPTI's buffers would die with the process: hand them over.
__attribute__((destructor)) void flush_at_exit() {
    Agent& a = the_agent();
    if (a.active && a.ring) flush_session(true);
}

} // namespace
} // namespace gtrace::agent

extern "C" {

// Called by CUDA at initialization when CUDA_INJECTION64_PATH names this library.
__attribute__((visibility("default"))) int InitializeInjection(void) {
    const char* config = getenv(GT_AGENT_ENV_CONFIG);
    if (!config) return 1;
    int rc = gtrace::agent::start(config, true);
    if (rc < 0) fprintf(stderr, "gtrace agent: could not start in pid %d (%s)\n", getpid(), strerror(-rc));
    return 1; // CUDA goes on whatever happened here
}
}
