#include "analyze/trace_data.h"

#include <atomic>
#include <charconv>
#include <cstring>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/json_cursor.h"
#include "analyze/trace_file.h"
#include "output/sample_tracks.h"

namespace gtrace {

std::string_view StringPool::intern(std::string_view s) {
    if (s.empty()) return {};
    if (auto it = index_.find(s); it != index_.end()) return *it;
    constexpr size_t kBlock = 1 << 20;
    if (s.size() > free_left_) {
        size_t size = std::max(kBlock, s.size());
        blocks_.push_back(std::make_unique<char[]>(size));
        free_ = blocks_.back().get(), free_left_ = size;
    }
    memcpy(free_, s.data(), s.size());
    std::string_view stored(free_, s.size());
    free_ += s.size(), free_left_ -= s.size();
    index_.insert(stored);
    return stored;
}

namespace {

uint64_t to_u64(std::string_view num) {
    uint64_t v = 0;
    if (auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v); ec == std::errc{} && end == num.data() + num.size())
        return v;
    double d = 0; // a fraction, an exponent, a sign or too large
    std::from_chars(num.data(), num.data() + num.size(), d);
    return d <= 0 ? 0 : d >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(d);
}

// Microseconds as gtrace writes them ("5000003022.500") to nanoseconds, exactly.
uint64_t us_to_ns(std::string_view num) {
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
    return d <= 0 ? 0 : static_cast<uint64_t>(d * 1000.0 + 0.5);
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
        if (auto it = seen_.find(s); it != seen_.end()) return *it;
        std::lock_guard lock(mu_);
        std::string_view v = pool_.intern(s);
        seen_.insert(v);
        return v;
    }

private:
    StringPool& pool_;
    std::mutex& mu_;
    std::unordered_set<std::string_view> seen_;
};

// One event's fields, as read; strings view the file or the scratch buffers of the Reader.
struct Event {
    std::string_view name, cat, ph, source, kind, arg_name, labels;
    uint64_t ts = 0, dur = 0, bytes = 0, allocated = 0;
    uint32_t pid = 0, tid = 0, correlation = 0, device = 0;
    bool has_pid = false, has_ts = false, has_dur = false, has_allocated = false;
};

// Which metadata a reader applied to a process, so that merging replays only those.
struct MetaSeen {
    bool label = false, labels = false;
};

// Reads events into processes: the whole file (the first reader), or, on another thread, the
// elements of traceEvents from a guessed element boundary up to the next reader's (see below).
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

    void metadata(const Event& e, ProcessData& p) {
        if (is(e.name, "process_name")) p.label = e.arg_name, meta_[e.pid].label = true;
        if (is(e.name, "process_labels")) {
            auto labels = nlohmann::json::parse(e.labels.empty() ? std::string_view("{}") : e.labels, nullptr, false);
            if (labels.is_object()) {
                if (labels.contains("rank") && labels["rank"].is_number_integer()) p.rank = labels["rank"].get<int>();
                p.forked = labels.contains("forked_from");
                meta_[e.pid].labels = true;
            }
        }
    }

private:
    // Reads a value only when it has the type wanted; anything else is skipped, as if absent.
    bool str(std::string_view& out, std::string& scratch) {
        if (c_.peek() != '"') return c_.skip(), false;
        out = c_.string(scratch);
        return true;
    }
    bool num(std::string_view& out) {
        char v = c_.peek();
        if (v != '-' && (v < '0' || v > '9')) return c_.skip(), false;
        out = c_.number();
        return true;
    }
    bool u32(uint32_t& out) {
        std::string_view n;
        return num(n) && (out = static_cast<uint32_t>(to_u64(n)), true);
    }
    bool u64(uint64_t& out) {
        std::string_view n;
        return num(n) && (out = to_u64(n), true);
    }
    bool ns(uint64_t& out) {
        std::string_view n;
        return num(n) && (out = us_to_ns(n), true);
    }

    void event() {
        Event e;
        std::string_view key;
        c_.begin_object();
        for (bool first = true; c_.next_key(first, key);) {
            if (key.size() == 2 && is(key, "ph")) str(e.ph, s_ph_);
            else if (key.size() == 2 && is(key, "ts")) e.has_ts = ns(e.ts);
            else if (is(key, "pid")) e.has_pid = u32(e.pid);
            else if (is(key, "tid")) u32(e.tid);
            else if (is(key, "cat")) str(e.cat, s_cat_);
            else if (is(key, "dur")) e.has_dur = ns(e.dur);
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
            if (is(key, "correlation")) u32(e.correlation);
            else if (is(key, "source")) str(e.source, s_source_);
            else if (is(key, "bytes")) u64(e.bytes);
            else if (is(key, "kind")) str(e.kind, s_kind_);
            else if (is(key, "allocated_bytes")) e.has_allocated = u64(e.allocated);
            else if (is(key, "device")) u32(e.device);
            else if (is(key, "name")) str(e.arg_name, s_arg_name_);
            else if (is(key, "labels")) str(e.labels, s_labels_);
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

    void add(const Event& e) {
        if (!e.has_pid) return;
        if (is(e.ph, "M")) return metadata(e, process(e.pid));
        if (is(e.ph, "C")) {
            if (is(e.cat, "gpu_memory") && e.has_ts && e.has_allocated) process(e.pid).memory.push_back({e.ts, e.device, e.allocated});
            return;
        }
        if (!is(e.ph, "X") || !e.has_ts || !e.has_dur) return;
        ProcessData& p = process(e.pid);
        uint64_t start = e.ts, end = e.ts + e.dur;
        if (is(e.cat, "cuda_api")) {
            CallSpan c;
            c.start_ns = start, c.end_ns = end, c.name = intern_(e.name), c.tid = e.tid;
            c.source = intern_(e.source), c.kind = intern_(e.kind);
            c.bytes = e.bytes, c.correlation = e.correlation;
            p.calls.push_back(c);
        } else if (is(e.cat, "kernel") || is(e.cat, "gpu_memcpy") || is(e.cat, "gpu_memset")) {
            GpuSpan g;
            g.start_ns = start, g.end_ns = end, g.name = intern_(e.name);
            g.kind = is(e.cat, "kernel") ? GpuKind::Kernel : is(e.cat, "gpu_memcpy") ? GpuKind::Memcpy : GpuKind::Memset;
            g.bytes = e.bytes, g.copy_kind = intern_(e.kind), g.correlation = e.correlation;
            p.gpu.push_back(g);
        } else if (is(e.cat, "sample") && e.tid == e.pid + kSampleTrackTidOffset) {
            CallSpan s;
            s.start_ns = start, s.end_ns = end, s.name = intern_(e.name), s.tid = e.pid;
            p.main_samples.push_back(s);
        } else if (is(e.cat, "torch_range")) {
            RangeSpan r;
            r.start_ns = start, r.end_ns = end, r.name = intern_(e.name), r.tid = e.tid;
            p.ranges.push_back(r);
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
    std::string s_name_, s_cat_, s_ph_, s_source_, s_kind_, s_arg_name_, s_labels_;
};


// Where another thread may start reading: the '{' of an element of traceEvents that follows
// ",\n", as gtrace writes them, one a line. A guess: a raw newline is always between tokens, but
// a pretty-printed file has them at every depth.
const char* element_start_after(const char* p, const TraceFile& f) {
    auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    for (const char* nl; p < f.end() && (nl = static_cast<const char*>(memchr(p, '\n', static_cast<size_t>(f.end() - p))));) {
        const char *before = nl, *after = nl + 1;
        while (before > f.begin() && ws(before[-1])) --before;
        while (ws(*after)) ++after; // the padding stops it
        if (before > f.begin() && before[-1] == ',' && *after == '{') return after;
        p = nl + 1;
    }
    return nullptr;
}

struct Worker {
    Worker(const TraceFile& f, StringPool& pool, std::mutex& mu) : intern(pool, mu), reader(f, processes, intern) {}
    std::map<uint32_t, ProcessData> processes;
    Interner intern;
    Reader reader;
    Reader::Stop stop = Reader::Stop::Cancelled;
    std::thread thread;
};

template <typename T>
void append(std::vector<T>& to, std::vector<T>& from) {
    if (to.empty()) to.swap(from);
    else to.insert(to.end(), from.begin(), from.end());
    std::vector<T>().swap(from);
}

// Reads the document. traceEvents is read on every core: the file is cut at guessed element
// boundaries; the first reader reads the document from its start, reader i (on a thread of its
// own) the elements from cut i until it passes cut i + 1. Reader i's events are right if it
// started at a real boundary, which the reader before it proves by arriving exactly at cut i;
// the first that does not, or that finds an error, ends the chain, and the first reader goes on
// from where the last right one stopped.
class Loader {
public:
    Loader(TraceData& t, const TraceFile& file, unsigned readers)
        : t_(t), file_(file), intern_(t.strings, pool_mu_), main_(file, t.processes, intern_) {
        unsigned n = readers ? readers : std::min(std::thread::hardware_concurrency(), 8u);
        if (n < 2 || (!readers && file.size() < (64 << 20))) return;
        for (unsigned i = 1; i < n; ++i) {
            const char* from = file.begin() + file.size() / n * i;
            const char* cut = element_start_after(cuts_.empty() ? from : std::max(from, cuts_.back() + 1), file);
            if (!cut) break;
            cuts_.push_back(cut);
        }
        for (size_t i = 0; i < cuts_.size(); ++i) {
            auto& w = *workers_.emplace_back(std::make_unique<Worker>(file, t.strings, pool_mu_));
            const char* until = i + 1 < cuts_.size() ? cuts_[i + 1] : file.end();
            w.thread = std::thread([&w, from = cuts_[i], until, this] { w.stop = w.reader.elements(from, until, cancel_); });
        }
    }
    ~Loader() { stop_workers(); }

    void run() {
        JsonCursor& c = main_.cursor();
        if (c.peek() != '{') {
            c.skip(); // not an object: still checked, so that broken JSON says so first
        } else {
            c.begin_object();
            std::string_view key;
            for (bool first = true; c.next_key(first, key);) {
                if (is(key, "traceEvents") && c.peek() == '[') {
                    events();
                    saw_events = true;
                } else if (is(key, "otherData") && c.peek() == '{') {
                    other_data(); // gtrace writes it last: judged once the whole file is read
                } else {
                    c.skip();
                }
            }
        }
        c.finish();
        stop_workers();
    }

    const JsonCursor& cursor() { return main_.cursor(); }
    bool saw_events = false;
    std::string tool;

private:
    void events() {
        JsonCursor& c = main_.cursor();
        c.begin_array();
        for (bool first = true; c.next_element(first);) {
            if (!joined_ && !cuts_.empty() && c.position() >= cuts_[0])
                if (const char* go_on = join(c.position() == cuts_[0])) {
                    c.seek(go_on);
                    if (c.peek() == ']') continue;
                }
            main_.element();
        }
    }

    // Takes the workers' events, in order, while each started at a real boundary; returns where
    // the first reader goes on (null: where it is).
    const char* join(bool arrived) {
        joined_ = true;
        const char* go_on = nullptr;
        for (size_t i = 0; i < workers_.size(); ++i) {
            if (!arrived) cancel_ = true;
            Worker& w = *workers_[i];
            w.thread.join();
            if (!arrived) continue;
            const JsonCursor& wc = w.reader.cursor();
            if (w.stop == Reader::Stop::Error) {
                main_.cursor().fail_at(file_.begin() + wc.offset());
                return nullptr;
            }
            merge(w);
            go_on = wc.position();
            arrived = w.stop == Reader::Stop::Boundary && i + 1 < cuts_.size() && go_on == cuts_[i + 1];
        }
        return go_on;
    }

    void merge(Worker& w) {
        for (auto& [pid, from] : w.processes) {
            ProcessData& to = t_.processes[pid];
            to.pid = pid;
            append(to.calls, from.calls), append(to.gpu, from.gpu), append(to.main_samples, from.main_samples);
            append(to.ranges, from.ranges), append(to.memory, from.memory);
            if (auto it = w.reader.meta().find(pid); it != w.reader.meta().end()) {
                if (it->second.label) to.label = std::move(from.label);
                if (it->second.labels) to.forked = from.forked;
            }
            if (from.rank) to.rank = from.rank;
        }
        w.processes.clear();
    }

    void stop_workers() {
        cancel_ = true;
        for (auto& w : workers_)
            if (w->thread.joinable()) w->thread.join();
    }

    void other_data() {
        JsonCursor& c = main_.cursor();
        tool.clear();
        c.begin_object();
        std::string_view key;
        for (bool first = true; c.next_key(first, key);) {
            if (is(key, "tool") && c.peek() == '"') {
                tool = c.string(scratch_);
            } else if (is(key, "gpu") && c.peek() == '{') {
                c.begin_object();
                for (bool f = true; c.next_key(f, key);) {
                    char v = c.peek();
                    if (is(key, "enabled") && (v == 't' || v == 'f')) t_.has_gpu = c.literal();
                    else c.skip();
                }
            } else {
                c.skip();
            }
        }
    }

    TraceData& t_;
    const TraceFile& file_;
    std::mutex pool_mu_;
    Interner intern_;
    Reader main_;
    std::vector<const char*> cuts_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::atomic<bool> cancel_ = false;
    bool joined_ = false;
    std::string scratch_;
};

} // namespace

Result<TraceData> load_trace(const std::string& path, unsigned readers) {
    auto file = TraceFile::open(path);
    if (!file) return file.error();
    TraceData t;
    t.path = path;
    bool saw_events;
    std::string tool;
    {
        Loader loader(t, *file, readers);
        loader.run(); // its threads are done when it returns
        if (loader.cursor().failed())
            return make_error(ExitCode::BadTrace, fmt::format("{} is not valid JSON (truncated or corrupted?) at byte {}; re-capture it",
                                                              path, loader.cursor().offset()));
        saw_events = loader.saw_events;
        tool = loader.tool;
    }
    if (!saw_events) return make_error(ExitCode::BadTrace, fmt::format("{} is not a Chrome trace (no traceEvents array)", path));
    if (tool != "gtrace")
        return make_error(ExitCode::BadTrace, fmt::format("{} was not written by gtrace (otherData.tool is missing); "
                                                          "gtrace report reads gtrace's own traces", path));
    return t;
}

} // namespace gtrace
