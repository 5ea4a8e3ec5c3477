#include "output/capture_registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "discover/proc_tree.h"
#include "foundation/output_file.h"

namespace gtrace {
namespace {

constexpr const char* kRootRegistry = "/run/gtrace";
constexpr off_t kMaxEntryBytes = 64 << 10;

std::string entry_name(const CaptureEntry& e) { return fmt::format("{}-{}.json", e.pid, e.start_ticks); }

std::optional<CaptureEntry> parse_entry(const std::string& text) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    CaptureEntry e;
    try {
        e.pid = j.at("pid").get<int>();
        e.start_ticks = j.at("start_ticks").get<uint64_t>();
        e.partial = j.at("partial").get<std::string>();
        e.output = j.at("output").get<std::string>();
        e.root_pid = j.value("root_pid", 0);
        e.start_unix_ms = j.value("start_unix_ms", uint64_t{0});
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
    return e;
}

// The text of a small regular file of the registry (no link followed); nullopt otherwise.
std::optional<std::string> read_small(int dir_fd, const std::string& name, off_t max_bytes) {
    int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat st {};
    std::optional<std::string> text;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < max_bytes) {
        text.emplace(static_cast<size_t>(st.st_size), '\0');
        ssize_t n = pread(fd, text->data(), text->size(), 0);
        text->resize(n > 0 ? static_cast<size_t>(n) : 0);
    }
    close(fd);
    return text;
}

} // namespace

bool CaptureEntry::running() const {
    auto st = read_proc_stat(pid);
    return st && st->start_time_ticks == start_ticks && st->state != 'Z' && st->state != 'X';
}

Result<CaptureRegistry> CaptureRegistry::open() {
    std::string dir;
    if (geteuid() == 0) {
        dir = kRootRegistry;
    } else {
        const char* runtime = getenv("XDG_RUNTIME_DIR");
        if (!runtime || runtime[0] != '/')
            return make_error(ExitCode::Internal, "no $XDG_RUNTIME_DIR to keep the list of running captures in");
        dir = std::string(runtime) + "/gtrace";
    }
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        return make_error(ExitCode::Internal, fmt::format("cannot create {}: {}", dir, strerror(errno)));
    // O_NOFOLLOW: a link planted at that path is refused, not followed.
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return make_error(ExitCode::Internal, fmt::format("cannot open {}: {}", dir, strerror(errno)));
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
        close(fd);
        return make_error(ExitCode::Internal, fmt::format("{} is not gtrace's own (another owner, or writable by others); remove it", dir));
    }
    if ((st.st_mode & 077) != 0) fchmod(fd, 0700);
    return CaptureRegistry(dir, fd);
}

CaptureRegistry::~CaptureRegistry() {
    if (fd_ >= 0) close(fd_);
}

// The names of the registry's *.json files (read once, then looked at: a file removed meanwhile is skipped by its reader).
std::vector<std::string> CaptureRegistry::json_names() const {
    std::vector<std::string> out;
    int dup_fd = dup(fd_);
    if (dup_fd < 0) return out;
    DIR* d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return out;
    }
    rewinddir(d);
    while (dirent* ent = readdir(d))
        if (std::string name = ent->d_name; name.ends_with(".json")) out.push_back(std::move(name));
    closedir(d);
    return out;
}

std::vector<CaptureEntry> CaptureRegistry::entries() const {
    std::vector<CaptureEntry> out;
    for (const std::string& name : json_names()) {
        auto text = read_small(fd_, name, kMaxEntryBytes);
        if (!text) continue;
        if (auto e = parse_entry(*text); e && entry_name(*e) == name) out.push_back(std::move(*e));
    }
    return out;
}

Result<void> CaptureRegistry::add(const CaptureEntry& e) {
    nlohmann::json j = {{"pid", e.pid},         {"start_ticks", e.start_ticks}, {"partial", e.partial},
                        {"output", e.output},   {"root_pid", e.root_pid},       {"start_unix_ms", e.start_unix_ms}};
    std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::string name = entry_name(e);
    unlinkat(fd_, name.c_str(), 0); // a dead process's entry that had our pid and start time cannot exist; be sure
    int fd = openat(fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return make_error(ExitCode::Internal, fmt::format("cannot write {}/{}: {}", dir_, name, strerror(errno)));
    bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    if (!ok) {
        unlinkat(fd_, name.c_str(), 0);
        return make_error(ExitCode::Internal, fmt::format("cannot write {}/{}", dir_, name));
    }
    return {};
}

void CaptureRegistry::remove(const CaptureEntry& e) { unlinkat(fd_, entry_name(e).c_str(), 0); }

namespace {

// "<kind>-<pid>-<ticks>.json" of this process; empty when /proc/self/stat cannot be read.
std::string own_published_name(const std::string& kind) {
    auto self = read_proc_stat(getpid());
    return self ? fmt::format("{}-{}-{}.json", kind, getpid(), self->start_time_ticks) : std::string();
}

} // namespace

Result<void> CaptureRegistry::publish(const std::string& kind, const std::string& text) {
    std::string name = own_published_name(kind);
    if (name.empty()) return make_error(ExitCode::Internal, "cannot read /proc/self/stat");
    std::string temp = name + ".new";
    unlinkat(fd_, temp.c_str(), 0);
    int fd = openat(fd_, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return make_error(ExitCode::Internal, fmt::format("cannot write {}/{}: {}", dir_, temp, strerror(errno)));
    bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    if (!ok || renameat(fd_, temp.c_str(), fd_, name.c_str()) != 0) {
        unlinkat(fd_, temp.c_str(), 0);
        return make_error(ExitCode::Internal, fmt::format("cannot write {}/{}", dir_, name));
    }
    return {};
}

void CaptureRegistry::unpublish(const std::string& kind) {
    if (std::string name = own_published_name(kind); !name.empty()) unlinkat(fd_, name.c_str(), 0);
}

std::vector<std::string> CaptureRegistry::published(const std::string& kind) const {
    std::vector<std::string> out;
    const std::string prefix = kind + "-";
    for (const std::string& name : json_names()) {
        if (!name.starts_with(prefix)) continue;
        int pid = 0;
        unsigned long long ticks = 0;
        char tail = 0;
        if (sscanf(name.c_str() + prefix.size(), "%d-%llu.jso%c", &pid, &ticks, &tail) != 3 || tail != 'n' || pid <= 0) continue;
        if (!CaptureEntry{pid, ticks, {}, {}, 0, 0}.running()) { // its capture was killed
            unlinkat(fd_, name.c_str(), 0);
            continue;
        }
        if (auto text = read_small(fd_, name, 16 << 20)) out.push_back(std::move(*text));
    }
    return out;
}

RegisteredCapture RegisteredCapture::add(const std::string& partial, const std::string& output, int root_pid,
                                         uint64_t start_unix_ms, std::string& note) {
    RegisteredCapture r;
    auto registry = CaptureRegistry::open();
    auto self = read_proc_stat(getpid());
    if (!registry || !self) {
        note = fmt::format("if this capture is killed, gtrace will not list its partial trace {}: {}", partial,
                           registry ? "cannot read /proc/self/stat" : registry.error().message);
        return r;
    }
    r.entry_ = {getpid(), self->start_time_ticks, absolute_output_path(partial), absolute_output_path(output), root_pid, start_unix_ms};
    if (auto added = registry->add(r.entry_); !added) {
        note = fmt::format("if this capture is killed, gtrace will not list its partial trace {}: {}", partial, added.error().message);
        return r;
    }
    r.registry_.emplace(std::move(*registry));
    return r;
}

RegisteredCapture& RegisteredCapture::operator=(RegisteredCapture&& o) noexcept {
    if (this != &o) {
        done();
        if (o.registry_) registry_.emplace(std::move(*o.registry_));
        o.registry_.reset();
        entry_ = std::move(o.entry_);
    }
    return *this;
}

void RegisteredCapture::done() {
    if (registry_) registry_->remove(entry_);
    registry_.reset();
}

} // namespace gtrace
