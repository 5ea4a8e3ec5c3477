#include "cli/recover_command.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/partial_trace.h"
#include "analyze/pftrace_reader.h"
#include "analyze/trace_data.h"
#include "foundation/input_file.h"
#include "foundation/output_file.h"
#include "foundation/printable.h"
#include "foundation/privilege.h"
#include "foundation/sigbus_guard.h"
#include "format/trace_file.h"
#include "output/capture_registry.h"
#include "output/pftrace_writer.h"
#include "gtrace_version.h"

namespace gtrace {
namespace {

// The whole file's bytes, read-only.
class Mapped {
public:
    Mapped(int fd, size_t size, const std::string& path) : size_(size) {
        if (size) data_ = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
        if (data_ != MAP_FAILED) guard_ = SigbusGuard(data_, size, path); // truncated under us: exit 11
    }
    ~Mapped() {
        if (data_ != MAP_FAILED) munmap(data_, size_);
    }
    bool ok() const { return size_ == 0 || data_ != MAP_FAILED; }
    std::string_view bytes() const { return size_ ? std::string_view(static_cast<const char*>(data_), size_) : std::string_view(); }

private:
    void* data_ = MAP_FAILED;
    size_t size_;
    SigbusGuard guard_;
};

// What the registry knew of the killed capture that wrote `partial`; `forget`: drop its entry
// (the partial is completed: nothing left to list).
nlohmann::json registered_facts(const std::string& partial, bool forget) {
    nlohmann::json facts = nlohmann::json::object();
    auto registry = CaptureRegistry::open();
    if (!registry) return facts;
    std::string where = absolute_output_path(partial);
    for (const auto& e : registry->entries())
        if (e.partial == where && !e.running()) {
            facts["root_pid"] = e.root_pid;
            facts["start_unix_ms"] = e.start_unix_ms;
            if (forget) registry->remove(e);
        }
    return facts;
}

Result<void> write_all_at(int fd, uint64_t offset, std::string_view bytes, const std::string& path) {
    for (size_t done = 0; done < bytes.size();) {
        ssize_t n = pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int err = n < 0 ? errno : ENOSPC;
            return make_error(write_error_code(err), fmt::format("completing {} failed: {}; free space and run gtrace recover again", path, strerror(err)));
        }
        done += static_cast<size_t>(n);
    }
    return {};
}

// Moves the completed partial to its output: a rename, or a copy onto another file system.
Result<void> move_into_place(int fd, uint64_t size, const std::string& partial, const std::string& output, bool force) {
    if (renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, output.c_str(), force ? 0 : RENAME_NOREPLACE) == 0) return {};
    if (errno == EEXIST)
        return make_error(ExitCode::OutputExists, fmt::format("output file {} already exists; use --force to overwrite it or choose another -o path", output));
    if (errno != EXDEV)
        return make_error(ExitCode::OutputUnwritable, fmt::format("cannot create {}: {}; the completed trace is {}", output, strerror(errno), partial));
    auto out = OutputFile::create(output, force);
    if (!out) return out.error();
    loff_t from = 0;
    while (static_cast<uint64_t>(from) < size) {
        ssize_t n = copy_file_range(fd, &from, out->fd(), nullptr, size - static_cast<uint64_t>(from), 0);
        if (n <= 0) {
            int err = n < 0 ? errno : EIO;
            return make_error(write_error_code(err), fmt::format("writing {} failed: {}; the completed trace is {}", output, strerror(err), partial));
        }
    }
    if (auto r = out->commit(); !r) return r;
    unlink(partial.c_str());
    return {};
}

// Where a partial's whole events end, in either single-file format.
struct PartialView {
    bool pftrace = false;
    std::optional<PartialEnd> end;
    PftraceOpenSlices open; // a .pftrace's slices open at the end
};

PartialView find_end(std::string_view bytes) {
    PartialView v;
    v.pftrace = looks_like_pftrace(bytes);
    if (!v.pftrace) {
        v.end = find_partial_end(bytes);
    } else if (auto e = find_pftrace_end(bytes)) {
        v.end = PartialEnd{e->complete, e->cut, e->packets};
        if (!e->complete) v.open = pftrace_open_slices(bytes.substr(0, e->cut)).value_or(PftraceOpenSlices{});
    }
    return v;
}

Result<void> recover_file(const std::string& partial, const std::string& output, bool force) {
    if (auto ok = check_outputs({{"-o", output, false}}, {partial}, force); !ok) return ok.error();
    AsInvoker as_invoker; // under sudo: a partial the user could complete themselves, completed as them
    if (!as_invoker.ok()) return make_error(ExitCode::Privileges, "cannot take the file-system credentials of the user who ran sudo");
    // O_NOFOLLOW: the partial gtrace made is a file; a link planted in its place is refused. It
    // is looked at (O_PATH) before it is opened: a device's open alone may act (rewind, arm).
    int handle = open(partial.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st {};
    if (handle < 0 || fstat(handle, &st) != 0 || S_ISLNK(st.st_mode)) {
        int err = handle < 0 ? errno : ELOOP;
        if (handle >= 0) close(handle);
        return make_error(ExitCode::Usage, fmt::format("cannot open {}: {}; give the partial trace file a killed capture left", partial,
                                                       err == ELOOP ? "it is a symbolic link" : strerror(err)));
    }
    if (!S_ISREG(st.st_mode)) {
        close(handle);
        return make_error(ExitCode::BadTrace, fmt::format("{} is not a regular file (it is {}); give the partial trace file a killed "
                                                          "capture left", partial, file_type_name(st.st_mode)));
    }
    int fd = open(fmt::format("/proc/self/fd/{}", handle).c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    int open_err = errno;
    close(handle);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0) close(fd);
        return make_error(ExitCode::Usage, fmt::format("cannot open {}: {}; give the partial trace file a killed capture left", partial,
                                                       strerror(fd < 0 ? open_err : EINVAL)));
    }
    struct Closer {
        int fd;
        ~Closer() { close(fd); }
    } closer{fd};
    if (flock(fd, LOCK_EX | LOCK_NB) != 0)
        return make_error(ExitCode::Usage, fmt::format("a running gtrace is still writing {}; it completes the trace itself when it stops", partial));

    size_t size = static_cast<size_t>(st.st_size);
    if (size) {
        auto in = InputFile::adopt(dup(fd), partial, ExitCode::BadTrace);
        if (!in) return in.error();
        if (auto shape = TraceFile::check_shape(*in, printable(partial)); !shape) return shape.error();
    }
    PartialView view;
    {
        Mapped m(fd, size, partial);
        if (!m.ok()) return make_error(ExitCode::Internal, fmt::format("cannot read {}: {}", partial, strerror(errno)));
        view = find_end(m.bytes());
    }
    std::optional<PartialEnd>& end = view.end;
    if (!end) return make_error(ExitCode::BadTrace, fmt::format("{} is not a partial trace gtrace wrote (it does not start like one)", partial));
    // Its whole events must read as gtrace report reads them: completing (and renaming) a partial
    // whose events are corrupted would replace it with a trace nothing opens.
    if (auto readable = load_trace(partial); !readable)
        return make_error(ExitCode::BadTrace, fmt::format("{} cannot be recovered: its events do not read back ({}); it is left as it was",
                                                          partial, readable.error().message));
    nlohmann::json facts = registered_facts(partial, false);
    uint64_t final_size = size;
    if (!end->complete) {
        facts.update({{"tool", "gtrace"},
                      {"version", kGtraceVersion},
                      {"clock", "CLOCK_MONOTONIC"},
                      {"stop_reason", "the capture was killed before it finished; completed by gtrace recover"},
                      {"lost_events", nullptr}, // unknown: the counters died with the capture
                      {"counters", nlohmann::json::object()},
                      {"recovered", {{"from", absolute_output_path(partial)}, {"events_kept", end->events}, {"bytes_dropped", size - end->cut}}}});
        std::string closing = partial_closing(facts.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        // The slices open where the capture died (sampled frames) end at its last event.
        if (view.pftrace) closing = pftrace_slice_ends(view.open) + pftrace_facts_packet(facts);
        if (ftruncate(fd, static_cast<off_t>(end->cut)) != 0)
            return make_error(write_error_code(errno), fmt::format("cannot complete {}: {}", partial, strerror(errno)));
        if (auto w = write_all_at(fd, end->cut, closing, partial); !w || fsync(fd) != 0) {
            (void)!ftruncate(fd, static_cast<off_t>(end->cut)); // still a partial gtrace reads
            return w ? make_error(write_error_code(errno), fmt::format("completing {} failed: {}", partial, strerror(errno))) : w.error();
        }
        final_size = end->cut + closing.size();
    }
    if (auto moved = move_into_place(fd, final_size, partial, output, force); !moved) return moved;
    registered_facts(partial, true);
    print_safe(stderr, "gtrace: recovered {} events from {} into {}{}\n", end->events, partial, output,
               end->cut < size ? fmt::format(" (the last {} bytes, an event cut short, dropped)", size - end->cut) : "");
    return {};
}

// A Kineto capture's directory: each partial file in it (and in other/) completed into its name.
Result<void> recover_directory(const std::string& dir, bool force) {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return make_error(ExitCode::Usage, fmt::format("cannot open {}: {}; give the directory a killed capture left", dir, strerror(errno)));
    struct Closer {
        int fd;
        ~Closer() { close(fd); }
    } closer{fd};
    if (flock(fd, LOCK_EX | LOCK_NB) != 0)
        return make_error(ExitCode::Usage, fmt::format("a running gtrace is still writing {}; it completes the trace itself when it stops", dir));
    std::vector<std::string> partials;
    for (const std::string& sub : {dir, dir + "/other"}) {
        std::error_code ec;
        if (std::filesystem::is_symlink(sub, ec)) continue; // gtrace made no link: one planted there is not followed
        for (const auto& entry : std::filesystem::directory_iterator(sub, ec))
            if (entry.is_regular_file(ec) && !entry.is_symlink(ec) && is_partial_name(entry.path().string()))
                partials.push_back(entry.path().string());
    }
    if (partials.empty())
        return make_error(ExitCode::Usage, fmt::format("{} holds no partial trace (*.partial); nothing to recover", dir));
    std::sort(partials.begin(), partials.end());
    for (const auto& p : partials)
        if (auto r = recover_file(p, p.substr(0, p.size() - std::string_view(".partial").size()), force); !r) return r;
    registered_facts(dir, true);
    return {};
}

} // namespace

Result<void> run_recover(const RecoverOptions& options) {
    const std::string& partial = options.partial;
    struct stat st {};
    if (lstat(partial.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        if (!options.output.empty())
            return make_error(ExitCode::Usage, fmt::format("{} is a directory (a Kineto capture): its files are recovered in place; drop -o", partial));
        return recover_directory(partial, options.force);
    }
    std::string output = options.output;
    if (output.empty()) {
        if (!is_partial_name(partial) || partial.size() == std::string_view(".partial").size())
            return make_error(ExitCode::Usage, fmt::format("{} does not end in .partial; say where the trace goes with -o FILE", partial));
        output = partial.substr(0, partial.size() - std::string_view(".partial").size());
    }
    return recover_file(partial, output, options.force);
}

} // namespace gtrace
