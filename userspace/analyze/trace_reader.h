// Reading one trace's events into processes (trace_data.cpp runs several Readers at once):
// what each event kind becomes, and the numbers and strings it keeps.
#pragma once
#include <atomic>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "format/json_cursor.h"
#include "analyze/trace_data.h"
#include "format/trace_file.h"
#include "format/json_traces.h"

namespace gtrace::trace_reader {

inline uint64_t to_u64(std::string_view num) {
    if (num.empty()) return 0;
    uint64_t v = 0;
    if (auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v); ec == std::errc{} && end == num.data() + num.size())
        return v;
    double d = 0; // a fraction, an exponent, a sign or too large
    std::from_chars(num.data(), num.data() + num.size(), d);
    return d <= 0 ? 0 : d >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(d);
}

// Microseconds as gtrace writes them ("5000003022.500") to nanoseconds, exactly.
inline uint64_t us_to_ns(std::string_view num) {
    const char *p = num.data(), *end = p + num.size();
    uint64_t whole = 0;
    for (; p < end && *p >= '0' && *p <= '9'; ++p) whole = whole * 10 + static_cast<uint64_t>(*p - '0');
    bool fits = p - num.data() < 16; // whole * 1000 + 999 cannot overflow
    if (p == end && fits) return whole * 1000;
    if (p < end && *p == '.' && fits) {
        uint64_t frac = 0;
        int n = 0;
        const char* f = p + 1;
        for (; f < end && *f >= '0' && *f <= '9'; ++f, ++n)
            if (n < 4) frac = frac * 10 + static_cast<uint64_t>(*f - '0');
        if (f == end) {
            for (; n < 4; ++n) frac *= 10;
            return whole * 1000 + (frac + 5) / 10; // rounded to the nanosecond
        }
    }
    double d = 0; // an exponent or a sign
    std::from_chars(num.data(), num.data() + num.size(), d);
    // NaN and values beyond uint64_t's nanoseconds (1.8e16 us, 584 years) clamp: no conversion
    // out of range (undefined behaviour; found by fuzz_trace_json).
    constexpr double kMaxUs = 1.8e16;
    if (!(d > 0)) return 0;
    return d >= kMaxUs ? static_cast<uint64_t>(kMaxUs) * 1000 : static_cast<uint64_t>(d * 1000.0 + 0.5);
}

// A copy's direction from its name, for traces that do not say it otherwise (Kineto's "Memcpy HtoD
// (Pageable -> Device)").
inline std::string_view copy_kind_of(std::string_view name) {
    for (std::string_view kind : {"HtoD", "DtoH", "DtoD", "HtoH", "PtoP"})
        if (name.size() >= 11 && name.substr(0, 7) == "Memcpy " && name.substr(7, 4) == kind) return kind;
    return {};
}

// Equality with a literal: a fixed-length compare the compiler inlines.
template <size_t N>
bool is(std::string_view s, const char (&word)[N]) {
    return s.size() == N - 1 && memcmp(s.data(), word, N - 1) == 0;
}

// Interns into the trace's pool from several threads: each keeps the strings it has seen, so
// the lock is only taken at a string's first sight in a thread.
class Interner {
public:
    Interner(StringPool& pool, std::mutex& mu) : pool_(pool), mu_(mu) {}
    std::string_view operator()(std::string_view s) {
        if (s.empty()) return {};
        // First a cache slot picked by the length and the first and last bytes: mostly, one compare.
        uint64_t head = 0, tail = 0;
        size_t n = std::min<size_t>(s.size(), 8);
        memcpy(&head, s.data(), n), memcpy(&tail, s.data() + s.size() - n, n);
        std::string_view& slot = cache_[((head ^ tail * 31 ^ s.size()) * 0x9E3779B97F4A7C15ull) >> 56];
        if (slot == s) return slot;
        if (auto it = seen_.find(s); it != seen_.end()) return slot = *it;
        std::lock_guard lock(mu_);
        slot = pool_.intern(s);
        seen_.insert(slot);
        return slot;
    }

private:
    StringPool& pool_;
    std::mutex& mu_;
    std::unordered_set<std::string_view> seen_;
    std::string_view cache_[256];
};

// One event's fields, as read: views of the file or of the Reader's scratch buffers. Numbers
// stay text until the event is known to be kept (half of a trace is flow events); empty: absent.
struct Event {
    std::string_view name, cat, ph, source, kind, arg_name, labels;
    std::string_view pid, tid, ts, dur, bytes, correlation, device, allocated, phase, issued, comm, nranks, group_depth, result;
    bool at_attach = false; // a GPU memory counter's start: the state the agent found
};

// Which metadata a reader applied to a process, so that merging replays only those.
struct MetaSeen {
    bool label = false, labels = false;
};

// Reads events into processes: the whole file (the first reader), or, on another thread, the
// elements of traceEvents from a guessed element boundary up to the next reader's (see Loader
// in trace_data.cpp).
class Reader {
public:
    enum class Stop { Boundary, ArrayEnd, Error, Cancelled };

    Reader(const TraceFile& file, std::map<uint32_t, ProcessData>& processes, Interner& intern)
        : file_(file), processes_(processes), intern_(intern), c_(file.begin(), file.end()), drop_(file, file.begin()) {}

    JsonCursor& cursor() { return c_; }
    const std::map<uint32_t, MetaSeen>& meta() const { return meta_; }

    // The elements from `from` on, until the first element boundary at or past `until`, or the
    // array's end. The cursor ends there.
    Stop elements(const char* from, const char* until, const std::atomic<bool>& cancel) {
        c_.seek(from);
        drop_ = TraceFile::Dropper(file_, from);
        for (;;) {
            element();
            if (c_.peek() == ']') return Stop::ArrayEnd;
            if (c_.peek() == ',') c_.seek(c_.position() + 1);
            else c_.fail_at(c_.position());
            c_.peek();
            if (c_.failed()) return Stop::Error;
            if (c_.position() >= until) return Stop::Boundary;
            if (cancel.load(std::memory_order_relaxed)) return Stop::Cancelled;
        }
    }

    void element() {
        if (c_.peek() == '{') event();
        else c_.skip();
        drop_.done_before(c_.position());
    }

private:
    void metadata(const Event& e, ProcessData& p) {
        if (is(e.name, "process_name")) p.label = e.arg_name, meta_[p.pid].label = true;
        if (is(e.name, "process_labels")) {
            auto labels = nlohmann::json::parse(e.labels.empty() ? std::string_view("{}") : e.labels, nullptr, false);
            if (labels.is_object()) {
                if (labels.contains("rank") && labels["rank"].is_number_integer()) p.rank = labels["rank"].get<int>();
                if (labels.contains("world_size") && labels["world_size"].is_number_integer())
                    p.world_size = labels["world_size"].get<int>();
                p.forked = labels.contains("forked_from");
                if (labels.contains("cmdline") && labels["cmdline"].is_string()) p.cmdline = labels["cmdline"].get<std::string>();
                meta_[p.pid].labels = true;
            }
        }
    }

    // Reads a value only when it has the type wanted; anything else is skipped, as if absent.
    bool str(std::string_view& out, std::string& scratch) {
        if (c_.peek() != '"') return c_.skip(), false;
        out = c_.string(scratch);
        return true;
    }
    void num(std::string_view& out) {
        char v = c_.peek();
        if (v != '-' && (v < '0' || v > '9')) return c_.skip();
        out = c_.number();
    }

    void event() {
        Event e;
        std::string_view key;
        c_.begin_object();
        for (bool first = true; c_.next_key(first, key);) {
            if (key.size() == 2 && is(key, "ph")) str(e.ph, s_ph_);
            else if (key.size() == 2 && is(key, "ts")) num(e.ts);
            else if (is(key, "pid")) num(e.pid);
            else if (is(key, "tid")) num(e.tid);
            else if (is(key, "cat")) str(e.cat, s_cat_);
            else if (is(key, "dur")) num(e.dur);
            else if (is(key, "name")) str(e.name, s_name_);
            else if (is(key, "args") && c_.peek() == '{') args(e);
            else c_.skip();
        }
        if (!c_.failed()) add(e);
    }

    void args(Event& e) {
        std::string_view key;
        c_.begin_object();
        for (bool first = true; c_.next_key(first, key);) {
            if (is(key, "correlation")) num(e.correlation);
            else if (is(key, "source")) str(e.source, s_source_);
            else if (is(key, "bytes")) num(e.bytes);
            else if (is(key, "kind")) str(e.kind, s_kind_);
            else if (is(key, "allocated_bytes")) num(e.allocated);
            else if (is(key, "device")) num(e.device);
            else if (is(key, "name")) str(e.arg_name, s_arg_name_);
            else if (is(key, "labels")) str(e.labels, s_labels_);
            else if (is(key, "phase")) str(e.phase, s_phase_);
            else if (is(key, "issued_us")) num(e.issued);
            else if (is(key, "comm")) num(e.comm);
            else if (is(key, "nranks")) num(e.nranks);
            else if (is(key, "group_depth")) num(e.group_depth);
            else if (is(key, "result")) num(e.result);
            else if (is(key, "at_attach") && (c_.peek() == 't' || c_.peek() == 'f')) e.at_attach = c_.literal();
            else c_.skip();
        }
    }

    // Consecutive events mostly come from the same process: skip the map then.
    ProcessData& process(uint32_t pid) {
        if (!last_ || last_->pid != pid) {
            last_ = &processes_[pid];
            last_->pid = pid;
        }
        return *last_;
    }

    static uint32_t u32(std::string_view n) { return static_cast<uint32_t>(to_u64(n)); }
    // "GPU memory (device N)": N (0 for the API-based "GPU memory (cudaMalloc)").
    static uint32_t device_in_name(std::string_view name) {
        size_t at = name.rfind("(device ");
        if (at == std::string_view::npos) return 0;
        std::string_view digits = name.substr(at + 8);
        return u32(digits.substr(0, digits.find(')')));
    }

    // Linux PIDs stop at 2^22 (PID_MAX_LIMIT): an event claiming another is no gtrace event, and
    // is not let grow the map of processes. Only kept events make a process.
    static constexpr uint64_t kMaxPid = 1u << 22;

    void add(const Event& e) {
        if (e.pid.empty() || to_u64(e.pid) > kMaxPid) return;
        if (is(e.ph, "M")) {
            if (is(e.name, "process_name") || is(e.name, "process_labels")) metadata(e, process(u32(e.pid)));
            return;
        }
        if (is(e.ph, "C")) {
            // The curve's first point: "gpu_memory,at_attach" (earlier traces: an at_attach argument).
            bool first_point = is(e.cat, "gpu_memory,at_attach");
            if ((is(e.cat, "gpu_memory") || first_point) && !e.ts.empty() && !e.allocated.empty())
                process(u32(e.pid)).memory.push_back({us_to_ns(e.ts), e.device.empty() ? device_in_name(e.name) : u32(e.device),
                                                      to_u64(e.allocated), e.at_attach || first_point});
            return;
        }
        if (!is(e.ph, "X") || e.ts.empty() || e.dur.empty()) return;
        bool kept = is(e.cat, "cuda_api") || is(e.cat, "kernel") || is(e.cat, "gpu_memcpy") || is(e.cat, "gpu_memset") ||
                    is(e.cat, "sample") || is(e.cat, "torch_range") || is(e.cat, "nvtx") || // gtrace's JSON; Kineto's names:
                    is(e.cat, "cuda_runtime") || is(e.cat, "cuda_driver") || is(e.cat, "python_function") ||
                    is(e.cat, "user_annotation") || is(e.cat, "collective") || is(e.cat, "off_cpu");
        // gtrace's Kineto writes a collective as a cpu_op with its phase (a torch range's cpu_op
        // twin, and torch.profiler's own ops, are not read).
        bool collective = is(e.cat, "collective") || (is(e.cat, "cpu_op") && !e.phase.empty());
        if (!kept && !collective) return;
        uint32_t pid = u32(e.pid), tid = u32(e.tid);
        ProcessData& p = process(pid);
        uint64_t start = us_to_ns(e.ts), end = start + us_to_ns(e.dur);
        if (is(e.cat, "cuda_api") || is(e.cat, "cuda_runtime") || is(e.cat, "cuda_driver")) { // gtrace's JSON, Kineto's
            CallSpan c;
            c.start_ns = start, c.end_ns = end, c.name = intern_(e.name), c.tid = tid;
            c.source = intern_(e.source), c.kind = intern_(e.kind);
            c.bytes = to_u64(e.bytes), c.correlation = u32(e.correlation);
            p.calls.push_back(c);
        } else if (is(e.cat, "kernel") || is(e.cat, "gpu_memcpy") || is(e.cat, "gpu_memset")) {
            GpuSpan g;
            g.start_ns = start, g.end_ns = end, g.name = intern_(e.name);
            g.kind = is(e.cat, "kernel") ? GpuKind::Kernel : is(e.cat, "gpu_memcpy") ? GpuKind::Memcpy : GpuKind::Memset;
            g.bytes = to_u64(e.bytes), g.copy_kind = intern_(e.kind.empty() ? copy_kind_of(e.name) : e.kind);
            g.correlation = u32(e.correlation);
            p.gpu.push_back(g);
        } else if ((is(e.cat, "sample") || is(e.cat, "python_function")) && tid == pid + kSampleTrackTidOffset) {
            CallSpan s;
            s.start_ns = start, s.end_ns = end, s.name = intern_(e.name), s.tid = pid;
            p.main_samples.push_back(s);
        } else if (collective) {
            CollectiveSpan c;
            c.start_ns = start, c.end_ns = end, c.name = intern_(e.name), c.tid = tid;
            c.wait = is(e.phase, "wait"), c.issued_ns = e.issued.empty() ? 0 : us_to_ns(e.issued);
            if ((c.nccl = is(e.phase, "nccl"))) {
                c.bytes = to_u64(e.bytes), c.comm = to_u64(e.comm), c.nranks = u32(e.nranks);
                c.group_depth = static_cast<uint8_t>(std::min<uint64_t>(to_u64(e.group_depth), 255));
                c.result = u32(e.result);
            }
            p.collectives.push_back(c);
        } else if (is(e.cat, "torch_range") || is(e.cat, "nvtx") || is(e.cat, "user_annotation")) {
            RangeSpan r;
            r.start_ns = start, r.end_ns = end, r.name = intern_(e.name), r.tid = tid;
            p.ranges.push_back(r);
        } else if (is(e.cat, "off_cpu")) {
            RangeSpan r;
            r.start_ns = start, r.end_ns = end, r.name = intern_(e.name), r.source = intern_(e.source);
            r.tid = tid >= kOffCpuTrackTidOffset && tid - kOffCpuTrackTidOffset < kOffCpuTrackTidOffset ? tid - kOffCpuTrackTidOffset : tid;
            p.off_cpu.push_back(r);
        }
    }

    const TraceFile& file_;
    std::map<uint32_t, ProcessData>& processes_;
    Interner& intern_;
    JsonCursor c_;
    TraceFile::Dropper drop_;
    ProcessData* last_ = nullptr;
    std::map<uint32_t, MetaSeen> meta_;
    // One buffer per string field, for the strings that had escapes.
    std::string s_name_, s_cat_, s_ph_, s_source_, s_kind_, s_arg_name_, s_labels_, s_phase_;
};


} // namespace gtrace::trace_reader
