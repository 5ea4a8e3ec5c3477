#include "output/chrome_trace.h"

#include <cstring>

#include <fmt/format.h>

#include "decode/api_table.h"

namespace gtrace {
namespace {

void append_ts_us(std::string& out, uint64_t ns) { fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000); }

std::string hex(uint64_t v) { return fmt::format("{:#x}", v); }

} // namespace

void append_json_escaped(std::string& out, std::string_view s) {
    for (unsigned char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
            else if (c >= 0x80) out += '?'; // symbol names are ASCII; never emit invalid UTF-8
            else out += static_cast<char>(c);
        }
    }
}

Result<ChromeTraceWriter> ChromeTraceWriter::create(const std::string& path, bool force) {
    if (auto ok = check_outputs(trace_outputs(path), {}, force); !ok) return ok.error();
    auto sink = TraceSink::create(path, force, kChromeTraceHeader);
    if (!sink) return sink.error();
    return ChromeTraceWriter(std::move(*sink));
}

void ChromeTraceWriter::emit(std::string_view event) {
    if (stream_events_++) sink_.append(",\n");
    sink_.append(event);
    sink_.commit();
}

std::string ChromeTraceWriter::write_error() const { return strerror(sink_.error()); }

void ChromeTraceWriter::write_call(const ApiCall& c) {
    if (!admit(c.start_ns)) return;
    buf_.clear();
    ++events_;
    auto out = std::back_inserter(buf_);
    fmt::format_to(out, "{{\"name\":\"{}\",\"cat\":\"cuda_api\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":", api_name(c.api),
                   c.pid, c.tid);
    append_ts_us(buf_, c.start_ns);
    buf_ += ",\"dur\":";
    append_ts_us(buf_, c.end_ns >= c.start_ns ? c.end_ns - c.start_ns : 0);
    fmt::format_to(out, ",\"args\":{{\"ret\":{}", c.ret);
    if (c.correlation) fmt::format_to(out, ",\"correlation\":{}", c.correlation);
    if (c.by_agent) fmt::format_to(out, ",\"recorded_by\":\"agent\"");
    if (c.launch) {
        const LaunchArgs& l = *c.launch;
        buf_ += ",\"kernel\":\"";
        append_json_escaped(buf_, c.kernel);
        fmt::format_to(out, "\",\"grid\":[{},{},{}],\"block\":[{},{},{}],\"shared_mem\":{}", l.grid.x, l.grid.y, l.grid.z,
                       l.block.x, l.block.y, l.block.z, l.shared_mem);
    }
    if (c.stream) fmt::format_to(out, ",\"stream\":\"{}\"", hex(*c.stream));
    if (c.bytes) fmt::format_to(out, ",\"bytes\":{}", *c.bytes);
    if (c.copy_kind) fmt::format_to(out, ",\"kind\":\"{}\"", copy_kind_name(*c.copy_kind));
    if (c.ptr) fmt::format_to(out, ",\"ptr\":\"{}\"", hex(*c.ptr));
    if (c.event) fmt::format_to(out, ",\"event\":\"{}\"", hex(*c.event));
    if (c.graph) fmt::format_to(out, ",\"graph\":\"{}\"", hex(*c.graph));
    if (c.handle) fmt::format_to(out, ",\"handle\":\"{}\"", hex(*c.handle));
    if (c.stack) {
        buf_ += ",\"source\":\"";
        append_json_escaped(buf_, c.stack->source);
        buf_ += "\",\"py_stack\":[";
        for (size_t i = 0; i < c.stack->texts.size(); ++i) {
            buf_ += i ? ",\"" : "\"";
            append_json_escaped(buf_, c.stack->texts[i]);
            buf_ += '"';
        }
        buf_ += ']';
    }
    buf_ += "}}";
    emit(buf_);
}

bool ChromeTraceWriter::admit(uint64_t ts_ns) {
    if (ts_ns < window_open_ns_ || ts_ns >= window_close_ns_) {
        ++outside_window_;
        return false;
    }
    if (events_ >= max_events_) {
        ++over_limit_;
        return false;
    }
    return true;
}

void ChromeTraceWriter::write_event(std::string_view json) {
    if (events_ >= max_events_) {
        ++over_limit_;
        return;
    }
    buf_.clear();
    ++events_;
    buf_ += json;
    emit(buf_);
}

void ChromeTraceWriter::write_slice(const std::string& name, const char* category, uint32_t pid, uint32_t tid,
                                    uint64_t start_ns, uint64_t dur_ns, std::string_view args_json) {
    if (!admit(start_ns)) return;
    buf_.clear();
    ++events_;
    buf_ += "{\"name\":\"";
    append_json_escaped(buf_, name);
    fmt::format_to(std::back_inserter(buf_), "\",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":", category, pid, tid);
    append_ts_us(buf_, start_ns);
    buf_ += ",\"dur\":";
    append_ts_us(buf_, dur_ns);
    if (!args_json.empty()) {
        buf_ += ",\"args\":";
        buf_ += args_json;
    }
    buf_ += '}';
    emit(buf_);
}

void ChromeTraceWriter::write_counter(const std::string& name, const char* category, uint32_t pid, uint64_t ts_ns,
                                      std::string_view args_json) {
    if (!admit(ts_ns)) return;
    buf_.clear();
    ++events_;
    buf_ += "{\"name\":\"";
    append_json_escaped(buf_, name);
    fmt::format_to(std::back_inserter(buf_), "\",\"cat\":\"{}\",\"ph\":\"C\",\"pid\":{},\"ts\":", category, pid);
    append_ts_us(buf_, ts_ns);
    buf_ += ",\"args\":";
    buf_ += args_json;
    buf_ += '}';
    emit(buf_);
}

std::vector<std::string> ChromeTraceWriter::pending_metadata(const TraceModel& model, const TrackNames& extra_threads,
                                                             bool all) {
    if (all) process_meta_.clear(), thread_meta_.clear();
    std::vector<std::string> out;
    auto meta = [](const char* name, uint32_t pid, uint32_t tid, const nlohmann::json& args) {
        nlohmann::json ev = {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", args}};
        return ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    auto thread = [&](uint32_t pid, uint32_t tid, const std::string& name) {
        std::string ev = meta("thread_name", pid, tid, {{"name", name}});
        if (std::string& last = thread_meta_[{pid, tid}]; last != ev) out.push_back(last = std::move(ev));
    };
    for (const auto& [pid, p] : model.processes()) {
        nlohmann::json labels = {{"cmdline", p.cmdline}, {"ppid", p.ppid}};
        if (p.ranks.rank) labels["rank"] = *p.ranks.rank;
        if (p.ranks.local_rank) labels["local_rank"] = *p.ranks.local_rank;
        if (p.ranks.world_size) labels["world_size"] = *p.ranks.world_size;
        if (p.forked_from) labels["forked_from"] = *p.forked_from;
        std::string events[] = {meta("process_name", pid, 0, {{"name", p.label()}}),
                                meta("process_sort_index", pid, 0, {{"sort_index", p.sort_index()}}),
                                meta("process_labels", pid, 0,
                                     {{"labels", labels.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)}})};
        std::string joined = events[0] + events[1] + events[2];
        if (std::string& last = process_meta_[pid]; last != joined) {
            last = std::move(joined);
            for (auto& ev : events) out.push_back(std::move(ev));
        }
        for (const auto& [tid, t] : p.threads) thread(pid, tid, t.name.empty() ? fmt::format("thread {}", tid) : t.name);
    }
    for (const auto& [key, name] : extra_threads) thread(key.first, key.second, name);
    return out;
}

void ChromeTraceWriter::write_metadata(const TraceModel& model, const TrackNames& extra_threads) {
    if (write_failed()) return;
    for (const auto& ev : pending_metadata(model, extra_threads, false)) emit(ev);
}

Result<std::optional<TraceCut>> ChromeTraceWriter::finish(const TraceModel& model, const nlohmann::json& other_data,
                                                          const TrackNames& extra_threads) {
    auto closing = [&](const SinkCut* cut) {
        // After a cut, metadata written into the stream may be gone with the events cut off.
        uint64_t events = cut ? cut->units_kept : stream_events_;
        std::string tail;
        for (const auto& ev : pending_metadata(model, extra_threads, cut != nullptr)) {
            if (events++) tail += ",\n";
            tail += ev;
        }
        nlohmann::json facts = other_data;
        if (cut)
            facts["cut"] = {{"error", cut->error},
                            {"events_kept", cut->units_kept},
                            {"events_dropped", stream_events_ - cut->units_kept}};
        tail += kChromeTraceClosing;
        tail += facts.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "}\n";
        return tail;
    };
    auto cut = sink_.finish(closing);
    if (!cut) return cut.error();
    if (!*cut) return std::optional<TraceCut>();
    return std::optional<TraceCut>(TraceCut{(*cut)->error, (*cut)->units_kept, stream_events_ - (*cut)->units_kept});
}

} // namespace gtrace
