// Clocks and the ground-truth log (one JSON line per GPU op, appended with a single write()).
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "model.h"

namespace gtsim {

uint64_t realtime_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}

static uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}

uint64_t to_mono(uint64_t realtime) {
    // Measured once, so every process-local conversion agrees: from the narrowest of many
    // bracketing reads (one read pair can be preempted, or take tens of us under emulation).
    static const int64_t offset = [] {
        uint64_t best_width = UINT64_MAX;
        int64_t best = 0;
        for (int i = 0; i < 64; ++i) {
            uint64_t r1 = realtime_ns(), m = mono_ns(), r2 = realtime_ns();
            if (r2 - r1 < best_width) {
                best_width = r2 - r1;
                best = int64_t(m) - int64_t(r1 + (r2 - r1) / 2);
            }
        }
        return best;
    }();
    return uint64_t(int64_t(realtime) + offset);
}

void sleep_until_realtime(uint64_t t) {
    timespec ts{time_t(t / 1000000000ULL), long(t % 1000000000ULL)};
    while (realtime_ns() < t) {
        int rc = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr);
        if (rc != 0 && rc != EINTR) break;
    }
}

uint32_t kernel_tid() {
    return uint32_t(syscall(SYS_gettid)); // not cached: a forked child's thread has a new tid
}

namespace {

int log_fd() {
    static const int fd = [] {
        const std::string& path = Model::get().cfg().log_path;
        if (path.empty()) return -1;
        int f = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (f < 0) fprintf(stderr, "gpusim: cannot open GTSIM_LOG=%s\n", path.c_str());
        return f;
    }();
    return fd;
}

// Writes into a buffer sized for the worst case up front: no printf and no growth checks, since a
// graph replay logs hundreds of thousands of ops per second.
struct Writer {
    char* p;
    void raw(const char* s) {
        size_t n = strlen(s);
        memcpy(p, s, n);
        p += n;
    }
    template <typename T>
    void num(const char* key, T value) { // key carries its own punctuation
        raw(key);
        p = std::to_chars(p, p + 24, value).ptr;
    }
    void str(const char* key, const char* s) {
        raw(key);
        *p++ = '"';
        for (; s && *s; ++s) {
            unsigned char c = static_cast<unsigned char>(*s);
            if (c == '"' || c == '\\') {
                *p++ = '\\';
                *p++ = char(c);
            } else if (c < 0x20) {
                static const char hex[] = "0123456789abcdef";
                memcpy(p, "\\u00", 4);
                p[4] = hex[c >> 4], p[5] = hex[c & 15];
                p += 6;
            } else {
                *p++ = char(c);
            }
        }
        *p++ = '"';
    }
};

// Bytes one line may take: fixed fields plus strings escaped at worst 6 bytes per byte.
size_t line_bound(const gtsim_gpu_op& op) {
    return 512 + 6 * ((op.name ? strlen(op.name) : 0) + (op.api_name ? strlen(op.api_name) : 0));
}

const char* copy_name(gtsim_copy_kind k) {
    switch (k) {
    case GTSIM_COPY_HTOD: return "HtoD";
    case GTSIM_COPY_DTOH: return "DtoH";
    case GTSIM_COPY_DTOD: return "DtoD";
    case GTSIM_COPY_HTOH: return "HtoH";
    default: return "";
    }
}

void append_line(Writer& w, const gtsim_gpu_op& op, int pid, uint32_t tid) {
    const char* kind = op.kind == GTSIM_OP_KERNEL ? "kernel" : op.kind == GTSIM_OP_MEMCPY ? "memcpy" : "memset";
    w.num("{\"pid\":", pid);
    w.num(",\"tid\":", tid);
    w.str(",\"kind\":", kind);
    w.num(",\"correlation\":", op.correlation_id);
    w.num(",\"device\":", op.device);
    w.num(",\"stream\":", op.stream_id);
    w.num(",\"start\":", op.start_ns);
    w.num(",\"end\":", op.end_ns);
    w.num(",\"mono_start\":", to_mono(op.start_ns));
    w.num(",\"mono_end\":", to_mono(op.end_ns));
    w.num(",\"graph\":", op.graph_id);
    w.num(",\"graph_node\":", op.graph_node_id);
    w.str(",\"api\":", op.api_name);
    if (op.kind == GTSIM_OP_KERNEL) {
        w.str(",\"name\":", op.name);
        w.num(",\"grid\":[", op.grid[0]);
        w.num(",", op.grid[1]);
        w.num(",", op.grid[2]);
        w.num("],\"block\":[", op.block[0]);
        w.num(",", op.block[1]);
        w.num(",", op.block[2]);
        w.num("],\"shared\":", op.dynamic_shared);
    } else if (op.kind == GTSIM_OP_MEMCPY) {
        w.num(",\"bytes\":", op.bytes);
        w.str(",\"copy\":", copy_name(op.copy_kind));
    } else {
        w.num(",\"bytes\":", op.bytes);
        w.num(",\"value\":", op.memset_value);
    }
    w.raw("}\n");
}

} // namespace

void log_ops(const gtsim_gpu_op* ops, size_t count) {
    int fd = log_fd();
    if (fd < 0 || count == 0) return;
    size_t bound = 0;
    for (size_t i = 0; i < count; ++i) bound += line_bound(ops[i]);
    std::string lines(bound, '\0');
    Writer w{lines.data()};
    int pid = int(getpid());
    uint32_t tid = kernel_tid();
    for (size_t i = 0; i < count; ++i) append_line(w, ops[i], pid, tid);
    // One write() on an O_APPEND fd: lines from several processes never interleave.
    ssize_t n = write(fd, lines.data(), size_t(w.p - lines.data()));
    (void)n;
}

} // namespace gtsim
