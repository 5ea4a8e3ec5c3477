#include "output/chrome_trace.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

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
    namespace fs = std::filesystem;
    fs::path p(path);
    fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        return make_error(ExitCode::OutputUnwritable,
                          fmt::format("output directory {} does not exist; create it or choose another -o path", dir.string()));
    if (fs::is_directory(p, ec))
        return make_error(ExitCode::OutputUnwritable, fmt::format("output {} is a directory; give a file name with -o", path));
    if (!force && fs::exists(p, ec))
        return make_error(ExitCode::OutputExists,
                          fmt::format("output file {} already exists; use --force to overwrite it or choose another -o path", path));

    ChromeTraceWriter w;
    w.path_ = path;
    w.force_ = force;
    w.temp_path_ = (dir / ("." + p.filename().string() + ".XXXXXX")).string();
    int fd = mkstemp(w.temp_path_.data());
    if (fd < 0)
        return make_error(ExitCode::OutputUnwritable,
                          fmt::format("cannot write in {}: {}; choose a writable directory with -o", dir.string(), strerror(errno)));
    fchmod(fd, 0644);
    w.out_ = fdopen(fd, "w");
    if (!w.out_) {
        close(fd);
        unlink(w.temp_path_.c_str());
        return make_error(ExitCode::Internal, "cannot open the trace stream");
    }
    setvbuf(w.out_, nullptr, _IOFBF, 1 << 20);
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", w.out_);
    return w;
}

ChromeTraceWriter::ChromeTraceWriter(ChromeTraceWriter&& o) noexcept
    : path_(std::move(o.path_)), temp_path_(std::move(o.temp_path_)), force_(o.force_), out_(o.out_),
      events_(o.events_) {
    o.out_ = nullptr;
}

ChromeTraceWriter::~ChromeTraceWriter() {
    if (out_) {
        fclose(out_);
        unlink(temp_path_.c_str());
    }
}

void ChromeTraceWriter::begin_event() {
    if (events_++) buf_ += ",\n";
}

void ChromeTraceWriter::write_call(const ApiCall& c) {
    if (!admit(c.start_ns)) return;
    buf_.clear();
    begin_event();
    auto out = std::back_inserter(buf_);
    fmt::format_to(out, "{{\"name\":\"{}\",\"cat\":\"cuda_api\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":", api_name(c.api),
                   c.pid, c.tid);
    append_ts_us(buf_, c.start_ns);
    buf_ += ",\"dur\":";
    append_ts_us(buf_, c.end_ns >= c.start_ns ? c.end_ns - c.start_ns : 0);
    fmt::format_to(out, ",\"args\":{{\"ret\":{}", c.ret);
    if (c.correlation) fmt::format_to(out, ",\"correlation\":{}", c.correlation);
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
    if (!c.py_stack.empty()) {
        buf_ += ",\"source\":\"";
        append_json_escaped(buf_, c.source);
        buf_ += "\",\"py_stack\":[";
        for (size_t i = 0; i < c.py_stack.size(); ++i) {
            buf_ += i ? ",\"" : "\"";
            append_json_escaped(buf_, c.py_stack[i]);
            buf_ += '"';
        }
        buf_ += ']';
    }
    buf_ += "}}";
    fwrite(buf_.data(), 1, buf_.size(), out_);
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
    begin_event();
    buf_ += json;
    fwrite(buf_.data(), 1, buf_.size(), out_);
}

void ChromeTraceWriter::write_slice(const std::string& name, const char* category, uint32_t pid, uint32_t tid,
                                    uint64_t start_ns, uint64_t dur_ns, std::string_view args_json) {
    if (!admit(start_ns)) return;
    buf_.clear();
    begin_event();
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
    fwrite(buf_.data(), 1, buf_.size(), out_);
}

void ChromeTraceWriter::write_counter(const std::string& name, const char* category, uint32_t pid, uint64_t ts_ns,
                                      std::string_view args_json) {
    if (!admit(ts_ns)) return;
    buf_.clear();
    begin_event();
    buf_ += "{\"name\":\"";
    append_json_escaped(buf_, name);
    fmt::format_to(std::back_inserter(buf_), "\",\"cat\":\"{}\",\"ph\":\"C\",\"pid\":{},\"ts\":", category, pid);
    append_ts_us(buf_, ts_ns);
    buf_ += ",\"args\":";
    buf_ += args_json;
    buf_ += '}';
    fwrite(buf_.data(), 1, buf_.size(), out_);
}

void ChromeTraceWriter::write_metadata(const TraceModel& model,
                                       const std::map<std::pair<uint32_t, uint32_t>, std::string>& extra_threads) {
    auto meta = [&](const char* name, uint32_t pid, uint32_t tid, const nlohmann::json& args) {
        buf_.clear();
        begin_event();
        nlohmann::json ev = {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", args}};
        buf_ += ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        fwrite(buf_.data(), 1, buf_.size(), out_);
    };
    for (const auto& [pid, p] : model.processes()) {
        meta("process_name", pid, 0, {{"name", p.label()}});
        meta("process_sort_index", pid, 0, {{"sort_index", p.sort_index()}});
        nlohmann::json labels = {{"cmdline", p.cmdline}, {"ppid", p.ppid}};
        if (p.ranks.rank) labels["rank"] = *p.ranks.rank;
        if (p.ranks.local_rank) labels["local_rank"] = *p.ranks.local_rank;
        if (p.ranks.world_size) labels["world_size"] = *p.ranks.world_size;
        if (p.forked_from) labels["forked_from"] = *p.forked_from;
        meta("process_labels", pid, 0, {{"labels", labels.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)}});
        for (const auto& [tid, t] : p.threads) meta("thread_name", pid, tid, {{"name", t.name.empty() ? fmt::format("thread {}", tid) : t.name}});
    }
    for (const auto& [key, name] : extra_threads) meta("thread_name", key.first, key.second, {{"name", name}});
}

Result<void> ChromeTraceWriter::finish(const TraceModel& model, const nlohmann::json& other_data,
                                       const std::map<std::pair<uint32_t, uint32_t>, std::string>& extra_threads) {
    write_metadata(model, extra_threads);
    std::string tail = "\n],\n\"otherData\":" + other_data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "}\n";
    fwrite(tail.data(), 1, tail.size(), out_);
    bool write_failed = fflush(out_) != 0 || fsync(fileno(out_)) != 0;
    fclose(out_);
    out_ = nullptr;
    if (write_failed) {
        unlink(temp_path_.c_str());
        return make_error(ExitCode::OutputUnwritable, fmt::format("writing {} failed: {}", path_, strerror(errno)));
    }
    unsigned flags = force_ ? 0 : RENAME_NOREPLACE;
    if (renameat2(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, path_.c_str(), flags) != 0) {
        int err = errno;
        unlink(temp_path_.c_str());
        return make_error(err == EEXIST ? ExitCode::OutputExists : ExitCode::OutputUnwritable,
                          fmt::format("cannot create {}: {}", path_, strerror(err)));
    }
    return {};
}

} // namespace gtrace
