// Every file gtrace writes goes through here: the trace, --summary-json, --folded, report
// --json/--html. gtrace runs as root on shared hosts, so an output path is hostile ground:
//  - all outputs of a command are checked together, before anything is attached (check_outputs);
//  - a file is created under a new name with O_EXCL (which never follows a link) and renamed
//    into place, so a symbolic link at the path is never written through;
//  - a symbolic link, a directory or a special file at an output path is refused, even with
//    --force; --force replaces an existing regular file (the old one is unlinked, not rewritten);
//  - mode 0600, narrowed by the umask; under sudo every check, create, rename and unlink is made
//    with the invoking user's file-system credentials: they get exactly the files they could make;
//  - an output's directory is held open from the check on, and its file created and renamed
//    relative to that handle: a directory on the path swapped for a link mid-capture changes nothing.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "foundation/result.h"

namespace gtrace {

struct OutputSpec {
    std::string option; // how the user named it, for messages: "-o", "--summary-json"
    std::string path;
    bool partial = false; // the trace's `<output>.partial`: an existing one may be a killed capture's
};

// The trace at `path` and the partial file it streams into while the capture runs.
std::string partial_path_of(const std::string& path);
std::vector<OutputSpec> trace_outputs(const std::string& path);

// The outputs of one command, before it starts: each path non-empty (else ExitCode::Usage), in an
// existing writable directory and not a directory, link or special file (else OutputUnwritable),
// absent unless `force` (else OutputExists); no two outputs naming the same file, and no output
// naming an input (ExitCode::Usage, one line naming both).
Result<void> check_outputs(const std::vector<OutputSpec>& outputs, const std::vector<std::string>& inputs, bool force);

// An output that is a directory gtrace creates (Kineto's trace, a file per rank): a new path in
// an existing writable directory, or with `force` an existing directory (not a link: refused
// even with --force). Errors as check_outputs'.
Result<void> check_output_directory(const std::string& option, const std::string& path, bool force);
// Creates it (mode 0700 under the umask, the sudo user's), or with `force` takes the existing
// one; returns an fd of it (O_DIRECTORY, never through a link).
Result<int> create_output_directory(const std::string& path, bool force);

// A running capture holds a lock on its partial trace: true while one does.
bool partial_in_use(const std::string& path);

// An output's absolute path: its directory resolved (links, ".."), its name kept as given.
std::string absolute_output_path(const std::string& path);

// A file being written under a temporary name beside its path, renamed into place by commit().
class OutputFile {
public:
    // `temp_path` empty: a hidden random name beside `path`; else that name (the partial trace),
    // which must not exist unless `force` (then it is removed first). Errors carry
    // OutputUnwritable.
    static Result<OutputFile> create(const std::string& path, bool force, const std::string& temp_path = {});
    OutputFile(OutputFile&& o) noexcept;
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;
    ~OutputFile(); // not committed: the temporary file is removed, unless keep_temp()

    int fd() const { return fd_; }
    const std::string& path() const { return path_; }
    const std::string& temp_path() const { return temp_path_; }
    // A path that reads the file being written, wherever its directory has gone since.
    std::string readable_path() const;
    // fsync, then rename into place; an existing file is replaced only with `force`.
    Result<void> commit();
    void keep_temp() { keep_ = true; }

private:
    OutputFile() = default;
    std::string path_, temp_path_, name_, temp_name_;
    bool force_ = false, keep_ = false, committed_ = false;
    int fd_ = -1, dir_fd_ = -1; // dir_fd_: the directory, held (O_PATH) from the output check on
};

// The whole of a small output (summary, folded stacks, report), written safely in one go.
Result<void> write_output(const std::string& path, std::string_view content, bool force);

// The exit code for a failed write: a full disk, a quota, an I/O error are WriteFailed.
ExitCode write_error_code(int err);

} // namespace gtrace
