#include "analyze/trace_data.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "format/json_cursor.h"
#include "analyze/partial_trace.h"
#include "analyze/pftrace_reader.h"
#include "format/trace_file.h"
#include "analyze/trace_reader.h"

namespace gtrace {

std::string_view StringPool::intern(std::string_view s) {
    if (s.empty()) return {};
    if (auto it = index_.find(s); it != index_.end()) return *it;
    constexpr size_t kBlock = 1 << 20;
    if (s.size() > free_left_) {
        size_t size = std::max(kBlock, s.size());
        blocks_.push_back(std::make_unique<char[]>(size));
        blocks_bytes_ += size;
        free_ = blocks_.back().get(), free_left_ = size;
    }
    memcpy(free_, s.data(), s.size());
    std::string_view stored(free_, s.size());
    free_ += s.size(), free_left_ -= s.size();
    index_.insert(stored);
    return stored;
}

namespace {

using namespace trace_reader;

// Where another thread may start reading: the '{' of an element of traceEvents that follows
// ",\n", as gtrace writes them, one a line. A guess: a raw newline is always between tokens, but
// a pretty-printed file has them at every depth.
const char* element_start_after(const char* p, const TraceFile& f) {
    auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    for (const char* nl; (nl = static_cast<const char*>(memchr(p, '\n', static_cast<size_t>(f.end() - p))));) {
        const char *before = nl, *after = nl + 1;
        while (before > p && ws(before[-1])) --before;
        while (ws(*after)) ++after; // the padding stops it
        if (before > p && before[-1] == ',' && *after == '{') return after;
        p = after; // each byte looked at once, whatever the runs of whitespace
    }
    return nullptr;
}

struct Worker {
    Worker(const TraceFile& f, StringPool& pool, std::mutex& mu) : intern(pool, mu), reader(f, processes, intern) {}
    std::map<uint32_t, ProcessData> processes;
    Interner intern;
    Reader reader;
    Reader::Stop stop = Reader::Stop::Cancelled;
    std::exception_ptr error; // out of memory, say: rethrown on the first reader's thread
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
            auto w = std::make_unique<Worker>(file, t.strings, pool_mu_);
            const char* until = i + 1 < cuts_.size() ? cuts_[i + 1] : file.end();
            try {
                w->thread = std::thread([w = w.get(), from = cuts_[i], until, this] {
                    try {
                        w->stop = w->reader.elements(from, until, cancel_);
                    } catch (...) {
                        w->error = std::current_exception();
                    }
                });
            } catch (const std::system_error&) {
                cuts_.resize(i); // no more threads: the first reader reads on from the last one's stop
                break;
            }
            workers_.push_back(std::move(w));
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
                } else if (is(key, "distributedInfo") && c.peek() == '{') {
                    kineto = true;
                    distributed_info();
                } else if (is(key, "baseTimeNanoseconds") && c.peek() != '"') {
                    kineto = true; // Kineto's epoch: gtrace's is CLOCK_REALTIME minus CLOCK_MONOTONIC
                    if (auto base = signed_number(c)) t_.realtime_offset_ns = base;
                } else if (is(key, "schemaVersion") || is(key, "deviceProperties") || is(key, "baseTimeNanoseconds")) {
                    kineto = true; // what torch.profiler (Kineto) writes
                    c.skip();
                } else {
                    c.skip();
                }
            }
        }
        c.finish();
        stop_workers();
        for (auto& w : workers_)
            if (w->error) std::rethrow_exception(w->error);
    }

    const JsonCursor& cursor() { return main_.cursor(); }
    bool saw_events = false;
    std::string tool;
    bool kineto = false;
    std::optional<int> kineto_rank; // distributedInfo.rank

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
            if (!arrived || w.error) {
                arrived = false; // its events are not taken; run() rethrows its error
                continue;
            }
            const JsonCursor& wc = w.reader.cursor();
            if (w.stop == Reader::Stop::Error) {
                cancel_ = true;
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
            append(to.collectives, from.collectives), append(to.off_cpu, from.off_cpu);
            if (auto it = w.reader.meta().find(pid); it != w.reader.meta().end()) {
                if (it->second.label) to.label = std::move(from.label);
                if (it->second.labels) to.forked = from.forked, to.cmdline = std::move(from.cmdline);
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

    void distributed_info() {
        JsonCursor& c = main_.cursor();
        c.begin_object();
        std::string_view key;
        for (bool first = true; c.next_key(first, key);) {
            char v = c.peek();
            if (is(key, "rank") && v >= '0' && v <= '9') kineto_rank = static_cast<int>(to_u64(c.number()));
            else c.skip();
        }
    }

    void other_data() {
        JsonCursor& c = main_.cursor();
        tool.clear();
        c.begin_object();
        std::string_view key;
        for (bool first = true; c.next_key(first, key);) {
            if (is(key, "tool") && c.peek() == '"') {
                tool = c.string(scratch_);
            } else if (is(key, "host") && c.peek() == '"') {
                t_.host = c.string(scratch_);
            } else if (is(key, "clocks") && c.peek() == '{') {
                clocks();
            } else if (is(key, "cpu_pressure") && c.peek() == '{') {
                c.begin_object();
                for (bool f = true; c.next_key(f, key);) {
                    if (is(key, "some") && c.peek() != '"' && c.peek() != 'n') t_.cpu_pressure = share(c.number());
                    else c.skip();
                }
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

    // otherData.clocks: {"monotonic_ns", "realtime_ns", ...} read together.
    void clocks() {
        JsonCursor& c = main_.cursor();
        std::optional<int64_t> mono, real;
        c.begin_object();
        std::string_view key;
        for (bool first = true; c.next_key(first, key);) {
            if (is(key, "monotonic_ns") && c.peek() != '"') mono = signed_number(c);
            else if (is(key, "realtime_ns") && c.peek() != '"') real = signed_number(c);
            else c.skip();
        }
        if (mono && real) t_.realtime_offset_ns = *real - *mono;
    }

    // A share in [0, 1]; nullopt for anything else.
    static std::optional<double> share(std::string_view n) {
        double v = 0;
        auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
        if (ec != std::errc{} || end != n.data() + n.size() || !(v >= 0 && v <= 1)) return std::nullopt;
        return v;
    }

    static std::optional<int64_t> signed_number(JsonCursor& c) {
        std::string_view n = c.number();
        int64_t v = 0;
        auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
        if (ec != std::errc{} || end != n.data() + n.size()) return std::nullopt; // a fraction, or out of range
        return v;
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

namespace {

Result<TraceData> load_pftrace(const std::string& path, const TraceFile& file, bool partial) {
    TraceData t;
    t.path = path;
    size_t length = file.size();
    if (partial) {
        auto end = find_pftrace_end({file.begin(), file.size()});
        if (!end)
            return make_error(ExitCode::BadTrace, fmt::format("{} is not a partial trace gtrace wrote (it does not start like one)", path));
        length = end->cut;
        if (!end->complete) t.partial_events = end->packets;
    }
    if (auto r = read_pftrace(file, length, path, t); !r) return r.error();
    return t;
}

} // namespace

// Kineto puts GPU work on pid = device: it belongs to the file's rank process (the one whose rank
// distributedInfo names, else the one that made the most CUDA calls).
void adopt_kineto_gpu_work(TraceData& t, std::optional<int> rank) {
    ProcessData* owner = nullptr;
    for (auto& [pid, p] : t.processes) {
        if (rank && !p.forked && (p.rank == rank || (!p.rank && !p.calls.empty() && !owner))) owner = &p;
        if (!rank && !p.calls.empty() && (!owner || p.calls.size() > owner->calls.size())) owner = &p;
    }
    if (!owner) return;
    if (rank && !owner->rank) owner->rank = rank;
    for (auto it = t.processes.begin(); it != t.processes.end();) {
        ProcessData& p = it->second;
        if (&p == owner || !p.calls.empty() || p.gpu.empty()) {
            ++it;
            continue;
        }
        owner->gpu.insert(owner->gpu.end(), p.gpu.begin(), p.gpu.end());
        p.gpu.clear();
        if (p.ranges.empty() && p.main_samples.empty() && p.memory.empty()) it = t.processes.erase(it);
        else ++it;
    }
    std::sort(owner->gpu.begin(), owner->gpu.end(), [](const GpuSpan& a, const GpuSpan& b) { return a.start_ns < b.start_ns; });
}

Result<TraceData> load_trace(const std::string& path, unsigned readers) {
    bool partial = is_partial_name(path);
    auto file = TraceFile::open(path, partial);
    if (!file) return file.error();
    if (looks_like_pftrace({file->begin(), file->size()})) return load_pftrace(path, *file, partial);
    TraceData t;
    t.path = path;
    if (partial) {
        auto end = find_partial_end({file->begin(), file->size()});
        if (!end)
            return make_error(ExitCode::BadTrace, fmt::format("{} is not a partial trace gtrace wrote (it does not start like one)", path));
        if (!end->complete) {
            if (!file->close_at(end->cut, partial_closing(R"({"tool":"gtrace","partial":true})")))
                return make_error(ExitCode::Internal, fmt::format("cannot close the partial trace {} in memory", path));
            t.partial_events = end->events;
        }
    }
    bool saw_events, kineto;
    std::string tool;
    {
        Loader loader(t, *file, readers);
        loader.run(); // its threads are done when it returns
        if (loader.cursor().failed())
            return make_error(ExitCode::BadTrace, fmt::format("{} is not valid JSON (truncated or corrupted?) at byte {}; re-capture it",
                                                              path, loader.cursor().offset()));
        saw_events = loader.saw_events;
        tool = loader.tool;
        kineto = loader.kineto;
        if (kineto) adopt_kineto_gpu_work(t, loader.kineto_rank);
    }
    if (!saw_events) return make_error(ExitCode::BadTrace, fmt::format("{} is not a Chrome trace (no traceEvents array)", path));
    if (kineto) {
        if (tool.empty()) // torch.profiler's own trace: GPU work is there when it recorded CUDA activities
            for (const auto& [pid, p] : t.processes) t.has_gpu = t.has_gpu || !p.gpu.empty();
    } else if (tool != "gtrace")
        return make_error(ExitCode::BadTrace, fmt::format("{} was not written by gtrace (otherData.tool is missing); "
                                                          "gtrace report reads gtrace's traces and Kineto (torch.profiler) traces", path));
    return t;
}

} // namespace gtrace
