// Clocks and the ground-truth log (one JSON line per GPU op, appended with a single write()).
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
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
    // Measured once, from back-to-back reads, so every process-local conversion agrees.
    static const int64_t offset = [] {
        uint64_t r1 = realtime_ns(), m = mono_ns(), r2 = realtime_ns();
        return int64_t(m) - int64_t(r1 + (r2 - r1) / 2);
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

void append_json_string(std::string& out, const char* s) {
    out += '"';
    for (; s && *s; ++s) {
        unsigned char c = static_cast<unsigned char>(*s);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c < 0x20) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += char(c);
        }
    }
    out += '"';
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

void append_line(std::string& line, const gtsim_gpu_op& op) {
    const char* kind = op.kind == GTSIM_OP_KERNEL ? "kernel" : op.kind == GTSIM_OP_MEMCPY ? "memcpy" : "memset";
    char buf[512];
    snprintf(buf, sizeof buf,
             "{\"pid\":%d,\"tid\":%u,\"kind\":\"%s\",\"correlation\":%u,\"device\":%d,\"stream\":%u,"
             "\"start\":%llu,\"end\":%llu,\"mono_start\":%llu,\"mono_end\":%llu,\"graph\":%u,\"graph_node\":%llu,"
             "\"api\":",
             int(getpid()), kernel_tid(), kind, op.correlation_id, op.device, op.stream_id,
             (unsigned long long)op.start_ns, (unsigned long long)op.end_ns, (unsigned long long)to_mono(op.start_ns),
             (unsigned long long)to_mono(op.end_ns), op.graph_id, (unsigned long long)op.graph_node_id);
    line += buf;
    append_json_string(line, op.api_name);
    if (op.kind == GTSIM_OP_KERNEL) {
        line += ",\"name\":";
        append_json_string(line, op.name);
        snprintf(buf, sizeof buf, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shared\":%u}\n", op.grid[0],
                 op.grid[1], op.grid[2], op.block[0], op.block[1], op.block[2], op.dynamic_shared);
    } else if (op.kind == GTSIM_OP_MEMCPY) {
        snprintf(buf, sizeof buf, ",\"bytes\":%llu,\"copy\":\"%s\"}\n", (unsigned long long)op.bytes,
                 copy_name(op.copy_kind));
    } else {
        snprintf(buf, sizeof buf, ",\"bytes\":%llu,\"value\":%d}\n", (unsigned long long)op.bytes, op.memset_value);
    }
    line += buf;
}

} // namespace

void log_ops(const gtsim_gpu_op* ops, size_t count) {
    int fd = log_fd();
    if (fd < 0 || count == 0) return;
    std::string lines;
    for (size_t i = 0; i < count; ++i) append_line(lines, ops[i]);
    // One write() on an O_APPEND fd: lines from several processes never interleave.
    ssize_t n = write(fd, lines.data(), lines.size());
    (void)n;
}

} // namespace gtsim
