// The captures running on this machine, one entry each, so that the next gtrace can tell the
// partial trace of a capture that was killed (kill -9, a crash) from one still being written.
// The registry is a directory only its owner can read or write: /run/gtrace as root,
// $XDG_RUNTIME_DIR/gtrace otherwise; a link there, or one owned by another user or writable by
// others, is refused. Each entry, `<pid>-<start ticks>.json`, holds the capture's pid and start
// time (from /proc/<pid>/stat: a reused pid is not the same process), its partial and its output.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "foundation/result.h"

namespace gtrace {

struct CaptureEntry {
    int pid = 0;
    uint64_t start_ticks = 0;
    std::string partial, output; // absolute paths
    int root_pid = 0;            // the traced tree's root
    uint64_t start_unix_ms = 0;

    // The process that wrote the entry still runs.
    bool running() const;
};

class CaptureRegistry {
public:
    // The registry directory, created if missing. Error: why it cannot be used (say it in a note).
    static Result<CaptureRegistry> open();
    CaptureRegistry(CaptureRegistry&& o) noexcept : dir_(o.dir_), fd_(o.fd_) { o.fd_ = -1; }
    CaptureRegistry(const CaptureRegistry&) = delete;
    ~CaptureRegistry();

    const std::string& dir() const { return dir_; }
    std::vector<CaptureEntry> entries() const;
    Result<void> add(const CaptureEntry& e);
    void remove(const CaptureEntry& e);

    // What a running capture publishes for other gtrace commands (`gtrace dump` reads the
    // collective counts): `<kind>-<pid>-<start ticks>.json` of this process, replaced whole each
    // time (written beside, then renamed); unpublish() removes it.
    Result<void> publish(const std::string& kind, const std::string& text);
    void unpublish(const std::string& kind);
    // The texts of `kind` published by captures still running; one whose capture is gone (killed)
    // is removed.
    std::vector<std::string> published(const std::string& kind) const;

private:
    CaptureRegistry(std::string dir, int fd) : dir_(std::move(dir)), fd_(fd) {}
    std::vector<std::string> json_names() const;
    std::string dir_;
    int fd_ = -1;
};

// This process's entry while its capture runs: removed by done() or on destruction, kept when
// the process dies first. `note`: why there is none (no registry), for the user.
class RegisteredCapture {
public:
    RegisteredCapture() = default;
    static RegisteredCapture add(const std::string& partial, const std::string& output, int root_pid,
                                 uint64_t start_unix_ms, std::string& note);
    RegisteredCapture(RegisteredCapture&& o) noexcept : registry_(std::move(o.registry_)), entry_(std::move(o.entry_)) {
        o.registry_.reset();
    }
    RegisteredCapture& operator=(RegisteredCapture&& o) noexcept;
    ~RegisteredCapture() { done(); }
    void done();

private:
    std::optional<CaptureRegistry> registry_;
    CaptureEntry entry_;
};

} // namespace gtrace
