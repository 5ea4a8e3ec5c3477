#include "foundation/output_file.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "foundation/privilege.h"

namespace gtrace {
namespace {

namespace fs = std::filesystem;

std::string dir_of(const std::string& path) {
    fs::path p(path);
    return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

// "out/", "out//." and "out" are one directory.
std::string dir_key(const std::string& dir) {
    std::string key = fs::path(dir).lexically_normal().string();
    while (key.size() > 1 && key.ends_with('/')) key.pop_back();
    return key.empty() ? std::string(".") : key;
}

// The directories of checked outputs, held open from the check until gtrace exits. Files are
// created and renamed relative to these handles: whoever owns a directory on an output's path
// cannot swap it for a link while the capture runs and so send a root-written file elsewhere.
class PinnedDirectories {
public:
    static PinnedDirectories& get() {
        static PinnedDirectories pinned;
        return pinned;
    }
    // Pins `dir` as it resolves now (the user's own path may go through links); an existing pin stays.
    void pin(const std::string& dir) {
        std::lock_guard lock(mutex_);
        auto& fd = fds_[dir_key(dir)];
        if (fd <= 0) fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    void pin_fd(const std::string& dir, int dir_fd) {
        std::lock_guard lock(mutex_);
        auto& fd = fds_[dir_key(dir)];
        if (fd <= 0) fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
    }
    // A handle of `dir` the caller owns: a copy of its pin, or (never checked) opened now. -1 + errno.
    int open(const std::string& dir) {
        {
            std::lock_guard lock(mutex_);
            if (auto it = fds_.find(dir_key(dir)); it != fds_.end() && it->second > 0) return fcntl(it->second, F_DUPFD_CLOEXEC, 0);
        }
        return ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    }

private:
    std::mutex mutex_;
    std::map<std::string, int> fds_;
};

// Where a path leads, to tell whether two paths name one file: the directory resolved (links
// and ".." in it), and the file's device and inode when it exists.
struct Identity {
    std::string where;
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    bool same_as(const Identity& o) const { return where == o.where || (exists && o.exists && dev == o.dev && ino == o.ino); }
};

std::string resolved(const fs::path& p) {
    std::error_code ec;
    fs::path r = fs::canonical(p, ec);
    return ec ? fs::absolute(p, ec).lexically_normal().string() : r.string();
}

// An output is the directory entry itself (lstat): a link there is a file of its own.
Identity output_identity(const std::string& path) {
    Identity id;
    id.where = absolute_output_path(path);
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) id.exists = true, id.dev = st.st_dev, id.ino = st.st_ino;
    return id;
}

// An input is the file read (links followed).
Identity input_identity(const std::string& path) {
    Identity id;
    id.where = resolved(path);
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) id.exists = true, id.dev = st.st_dev, id.ino = st.st_ino;
    return id;
}

// With the credentials files are made with (AT_EACCESS: under sudo the invoker's, not the real root's).
bool may_write_in(const std::string& dir) { return faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) == 0; }

Error invoker_unavailable(const std::string& what) {
    return make_error(ExitCode::OutputUnwritable, fmt::format("cannot take the file-system credentials of uid {} (who ran sudo) to "
                                                              "write {}: the kernel refused",
                                                              Privilege::invoker().uid, what));
}

Result<void> check_one(const OutputSpec& o, bool force) {
    AsInvoker as_invoker;
    if (!as_invoker.ok()) return invoker_unavailable(o.path);
    std::string name = fs::path(o.path).filename().string();
    if (name.empty() || name == "." || name == "..")
        return make_error(ExitCode::OutputUnwritable, fmt::format("{} {} names a directory; give a file name", o.option, o.path));
    std::string dir = dir_of(o.path);
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return make_error(ExitCode::OutputUnwritable,
                          fmt::format("output directory {} does not exist; create it or choose another {} path", dir, o.option));
    if (lstat(o.path.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return make_error(ExitCode::OutputUnwritable, fmt::format("output {} is a directory; give a file name with {}", o.path, o.option));
        if (S_ISLNK(st.st_mode))
            return make_error(ExitCode::OutputUnwritable,
                              fmt::format("output {} is a symbolic link; gtrace neither writes through nor replaces links: "
                                          "remove it or choose another {} path", o.path, o.option));
        if (!S_ISREG(st.st_mode))
            return make_error(ExitCode::OutputUnwritable,
                              fmt::format("output {} is not a regular file; choose another {} path", o.path, o.option));
        if (o.partial && partial_in_use(o.path))
            return make_error(ExitCode::OutputExists,
                              fmt::format("another gtrace is capturing into {} now; choose another -o path", o.path));
        if (o.partial && !force)
            return make_error(ExitCode::OutputExists,
                              fmt::format("{} is left from a capture that was killed; complete it with: gtrace recover {} "
                                          "(or discard it with --force)", o.path, o.path));
        if (!force)
            return make_error(ExitCode::OutputExists,
                              fmt::format("output file {} already exists; use --force to overwrite it or choose another {} path",
                                          o.path, o.option));
    }
    if (!may_write_in(dir))
        return make_error(ExitCode::OutputUnwritable,
                          fmt::format("cannot write in {}: {}; choose a writable directory with {}", dir, strerror(errno), o.option));
    PinnedDirectories::get().pin(dir);
    return {};
}

std::string random_suffix() {
    unsigned char bytes[6];
    if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
        for (auto& b : bytes) b = static_cast<unsigned char>(rand());
    std::string out;
    for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
    return out;
}

} // namespace

bool partial_in_use(const std::string& path) {
    AsInvoker as_invoker;
    int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    bool locked = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return locked;
}

std::string absolute_output_path(const std::string& path) {
    return (fs::path(resolved(dir_of(path))) / fs::path(path).filename()).lexically_normal().string();
}

std::string partial_path_of(const std::string& path) { return path + ".partial"; }

std::vector<OutputSpec> trace_outputs(const std::string& path) {
    return {{"-o", path, false}, {"-o's partial trace", partial_path_of(path), true}};
}

Result<void> check_outputs(const std::vector<OutputSpec>& outputs, const std::vector<std::string>& inputs, bool force) {
    for (const auto& o : outputs)
        if (o.path.empty())
            return make_error(ExitCode::Usage, fmt::format("{} '': an empty file name; give a file name", o.option));
    std::vector<Identity> ids;
    for (const auto& o : outputs) ids.push_back(output_identity(o.path));
    for (size_t i = 0; i < outputs.size(); ++i)
        for (size_t j = i + 1; j < outputs.size(); ++j)
            if (ids[i].same_as(ids[j]))
                return make_error(ExitCode::Usage, fmt::format("{} {} and {} {} name the same file; give each output a path of its own",
                                                               outputs[i].option, outputs[i].path, outputs[j].option, outputs[j].path));
    for (const auto& in : inputs) {
        Identity input = input_identity(in);
        for (size_t i = 0; i < outputs.size(); ++i)
            if (ids[i].same_as(input))
                return make_error(ExitCode::Usage, fmt::format("{} {} names {}, which gtrace reads; write to another file",
                                                               outputs[i].option, outputs[i].path, in));
    }
    for (const auto& o : outputs)
        if (auto r = check_one(o, force); !r) return r;
    return {};
}

Result<void> check_output_directory(const std::string& option, const std::string& given, bool force) {
    AsInvoker as_invoker;
    if (!as_invoker.ok()) return invoker_unavailable(given);
    if (given.empty()) return make_error(ExitCode::Usage, fmt::format("{} '': an empty name; give a directory name", option));
    std::string path = given; // "out/" names out, whose parent is ".", not out itself
    while (path.size() > 1 && path.ends_with('/')) path.pop_back();
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) {
        if (errno != ENOENT)
            return make_error(ExitCode::OutputUnwritable, fmt::format("cannot use {}: {}; choose another {} path", path, strerror(errno), option));
        std::string parent = dir_of(path);
        if (stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
            return make_error(ExitCode::OutputUnwritable,
                              fmt::format("directory {} does not exist; create it or choose another {} path", parent, option));
        if (!may_write_in(parent))
            return make_error(ExitCode::OutputUnwritable,
                              fmt::format("cannot write in {}: {}; choose a writable directory with {}", parent, strerror(errno), option));
        PinnedDirectories::get().pin(parent);
        return {};
    }
    if (S_ISLNK(st.st_mode))
        return make_error(ExitCode::OutputUnwritable,
                          fmt::format("output {} is a symbolic link; gtrace does not write through links, even with --force: "
                                      "give the real path with {}", path, option));
    if (!S_ISDIR(st.st_mode))
        return make_error(ExitCode::OutputUnwritable,
                          fmt::format("output {} is not a directory (this format writes a directory of files); choose another {} path",
                                      path, option));
    if (partial_in_use(path))
        return make_error(ExitCode::OutputExists, fmt::format("another gtrace is capturing into {} now; choose another {} path", path, option));
    if (!force)
        return make_error(ExitCode::OutputExists,
                          fmt::format("output directory {} already exists; use --force to write into it or choose another {} path", path, option));
    if (!may_write_in(path))
        return make_error(ExitCode::OutputUnwritable, fmt::format("cannot write in {}: {}; choose another {} path", path, strerror(errno), option));
    PinnedDirectories::get().pin(dir_of(path));
    return {};
}

Result<int> create_output_directory(const std::string& given, bool force) {
    AsInvoker as_invoker; // the directory is the invoker's as if they had made it
    if (!as_invoker.ok()) return invoker_unavailable(given);
    std::string path = dir_key(given);
    std::string name = fs::path(path).filename().string();
    int parent = PinnedDirectories::get().open(dir_of(path));
    if (parent < 0)
        return make_error(ExitCode::OutputUnwritable, fmt::format("cannot open the directory of {}: {}; choose another path", path, strerror(errno)));
    bool made = mkdirat(parent, name.c_str(), 0700) == 0;
    if (!made && !(errno == EEXIST && force)) {
        int err = errno;
        close(parent);
        return make_error(err == EEXIST ? ExitCode::OutputExists : ExitCode::OutputUnwritable,
                          fmt::format("cannot create directory {}: {}; choose another path", path, strerror(err)));
    }
    int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    close(parent);
    if (fd < 0)
        return make_error(ExitCode::OutputUnwritable, fmt::format("cannot open directory {}: {}; give the real path of a directory",
                                                                  path, strerror(err)));
    PinnedDirectories::get().pin_fd(path, fd); // its files are created through this handle
    return fd;
}

ExitCode write_error_code(int err) {
    return err == ENOSPC || err == EDQUOT || err == EIO || err == EFBIG ? ExitCode::WriteFailed : ExitCode::OutputUnwritable;
}

Result<OutputFile> OutputFile::create(const std::string& path, bool force, const std::string& temp_path) {
    AsInvoker as_invoker; // under sudo the file is the invoker's as if they had made it
    if (!as_invoker.ok()) return invoker_unavailable(path);
    OutputFile f;
    f.path_ = path;
    f.force_ = force;
    f.name_ = fs::path(path).filename().string();
    std::string dir = dir_of(path);
    if (!temp_path.empty() && dir_key(dir_of(temp_path)) != dir_key(dir))
        return make_error(ExitCode::Internal, fmt::format("{} is not beside {}: it could not be renamed into place", temp_path, path));
    f.dir_fd_ = PinnedDirectories::get().open(dir);
    if (f.dir_fd_ < 0)
        return make_error(ExitCode::OutputUnwritable, fmt::format("cannot open {}: {}; choose a writable directory", dir, strerror(errno)));
    // O_EXCL: the name must be new, and a link there (even a dangling one) is never followed.
    // Mode 0600; the kernel narrows it by the umask.
    constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    if (temp_path.empty()) {
        for (int tries = 0; f.fd_ < 0 && tries < 100; ++tries) {
            f.temp_name_ = "." + f.name_ + "." + random_suffix() + ".tmp";
            f.fd_ = openat(f.dir_fd_, f.temp_name_.c_str(), kFlags, 0600);
            if (f.fd_ < 0 && errno != EEXIST) break;
        }
    } else {
        f.temp_name_ = fs::path(temp_path).filename().string();
        f.fd_ = openat(f.dir_fd_, f.temp_name_.c_str(), kFlags, 0600);
        if (f.fd_ < 0 && errno == EEXIST && force && unlinkat(f.dir_fd_, f.temp_name_.c_str(), 0) == 0)
            f.fd_ = openat(f.dir_fd_, f.temp_name_.c_str(), kFlags, 0600);
    }
    if (f.fd_ < 0) {
        int err = errno;
        f.temp_name_.clear(); // not ours: nothing to remove
        return make_error(ExitCode::OutputUnwritable, fmt::format("cannot write in {}: {}; choose a writable directory", dir, strerror(err)));
    }
    f.temp_path_ = (fs::path(dir) / f.temp_name_).string();
    return f;
}

OutputFile::OutputFile(OutputFile&& o) noexcept
    : path_(std::move(o.path_)), temp_path_(std::move(o.temp_path_)), name_(std::move(o.name_)), temp_name_(std::move(o.temp_name_)),
      force_(o.force_), keep_(o.keep_), committed_(o.committed_), fd_(o.fd_), dir_fd_(o.dir_fd_) {
    o.fd_ = o.dir_fd_ = -1;
    o.temp_name_.clear();
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) close(fd_);
    AsInvoker as_invoker;
    if (!committed_ && !keep_ && !temp_name_.empty() && dir_fd_ >= 0) unlinkat(dir_fd_, temp_name_.c_str(), 0);
    if (dir_fd_ >= 0) close(dir_fd_);
}

std::string OutputFile::readable_path() const { return fd_ >= 0 ? fmt::format("/proc/self/fd/{}", fd_) : temp_path_; }

Result<void> OutputFile::commit() {
    if (fsync(fd_) != 0) {
        int err = errno;
        return make_error(write_error_code(err), fmt::format("writing {} failed: {}; free space or choose another path", path_, strerror(err)));
    }
    close(fd_);
    fd_ = -1;
    AsInvoker as_invoker; // replacing a file (--force) is what the invoker could do in that directory
    if (!as_invoker.ok()) return invoker_unavailable(path_);
    if (renameat2(dir_fd_, temp_name_.c_str(), dir_fd_, name_.c_str(), force_ ? 0 : RENAME_NOREPLACE) != 0) {
        int err = errno;
        if (err == EEXIST)
            return make_error(ExitCode::OutputExists,
                              fmt::format("output file {} appeared while gtrace ran; use --force to overwrite it or choose another path", path_));
        return make_error(ExitCode::OutputUnwritable, fmt::format("cannot create {}: {}", path_, strerror(err)));
    }
    committed_ = true;
    return {};
}

Result<void> write_output(const std::string& path, std::string_view content, bool force) {
    auto f = OutputFile::create(path, force);
    if (!f) return f.error();
    for (size_t done = 0; done < content.size();) {
        ssize_t n = write(f->fd(), content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = errno;
            return make_error(write_error_code(err), fmt::format("writing {} failed: {}; free space or choose another path", path, strerror(err)));
        }
        done += static_cast<size_t>(n);
    }
    return f->commit();
}

} // namespace gtrace
