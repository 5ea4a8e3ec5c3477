#include "foundation/input_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace gtrace {

InputFile& InputFile::operator=(InputFile&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) close(fd_);
        fd_ = o.fd_, st_ = o.st_;
        o.fd_ = -1;
    }
    return *this;
}

InputFile::~InputFile() {
    if (fd_ >= 0) close(fd_);
}

std::string InputFile::fd_path() const { return fmt::format("/proc/self/fd/{}", fd_); }

Result<InputFile> InputFile::adopt(int fd, const std::string& shown, ExitCode not_regular) {
    InputFile f;
    f.fd_ = fd;
    if (fd < 0) return make_error(ExitCode::Usage, fmt::format("cannot read {}: bad file descriptor", shown));
    if (fstat(fd, &f.st_) != 0) return make_error(ExitCode::Usage, fmt::format("cannot read {}: {}", shown, strerror(errno)));
    if (!S_ISREG(f.st_.st_mode))
        return make_error(not_regular, fmt::format("{} is not a regular file (it is {})", shown, file_type_name(f.st_.st_mode)));
    return f;
}

const char* file_type_name(mode_t mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    default: return "not a file";
    }
}

Result<InputFile> open_input_file(const std::string& path, ExitCode not_regular) {
    InputFile f;
    // Looked at before it is opened: opening a device runs its driver's open (a tape rewinds, a
    // watchdog arms), so anything but a regular file is refused through an O_PATH handle.
    int handle = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (handle < 0 || fstat(handle, &f.st_) != 0) {
        int err = errno;
        if (handle >= 0) close(handle);
        return make_error(ExitCode::Usage, fmt::format("cannot read {}: {}", path, strerror(err)));
    }
    if (!S_ISREG(f.st_.st_mode)) {
        close(handle);
        return make_error(not_regular, fmt::format("{} is not a regular file (it is {})", path, file_type_name(f.st_.st_mode)));
    }
    // That very file, opened for reading (O_NONBLOCK all the same: nothing may wait here).
    f.fd_ = ::open(fmt::format("/proc/self/fd/{}", handle).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    int err = errno;
    close(handle);
    if (f.fd_ < 0) return make_error(ExitCode::Usage, fmt::format("cannot read {}: {}", path, strerror(err)));
    if (fstat(f.fd_, &f.st_) != 0 || !S_ISREG(f.st_.st_mode))
        return make_error(not_regular, fmt::format("{} is not a regular file (it is {})", path, file_type_name(f.st_.st_mode)));
    return f;
}

std::optional<uint64_t> find_in_file(int fd, uint64_t offset, uint64_t size, std::string_view needle) {
    if (needle.empty() || size < needle.size()) return std::nullopt;
    constexpr size_t kChunk = 1 << 20;
    std::string buf(kChunk + needle.size(), '\0');
    size_t kept = 0; // bytes carried over from the previous chunk: a match may straddle two
    for (uint64_t at = offset, end = offset + size; at < end;) {
        size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, end - at));
        ssize_t n = pread(fd, buf.data() + kept, want, static_cast<off_t>(at));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return std::nullopt;
        size_t have = kept + static_cast<size_t>(n);
        if (size_t pos = std::string_view(buf.data(), have).find(needle); pos != std::string_view::npos)
            return at - kept + pos;
        kept = std::min(have, needle.size() - 1);
        memmove(buf.data(), buf.data() + have - kept, kept);
        at += static_cast<uint64_t>(n);
    }
    return std::nullopt;
}

uint64_t hole_bytes(const InputFile& file) {
    constexpr int kMaxExtents = 4096;
    uint64_t size = file.size(), data = 0, at = 0;
    bool capped = true;
    for (int n = 0; n < kMaxExtents; ++n) {
        if (at >= size) {
            capped = false;
            break;
        }
        off_t begin = lseek(file.fd(), static_cast<off_t>(at), SEEK_DATA);
        if (begin < 0) { // ENXIO: only a hole from here on (or a file system without the map: all data)
            if (errno == EINVAL) data = size;
            capped = false;
            break;
        }
        off_t end = lseek(file.fd(), begin, SEEK_HOLE);
        if (end < begin) end = static_cast<off_t>(size);
        data += static_cast<uint64_t>(end - begin);
        at = static_cast<uint64_t>(end);
    }
    if (capped && at > 0 && at < size) // more extents than looked at: the rest as the part seen
        data = static_cast<uint64_t>(static_cast<long double>(data) * size / at);
    lseek(file.fd(), 0, SEEK_SET);
    return size > data ? size - data : 0;
}

std::string read_input_file(const std::string& path, size_t max_bytes) {
    auto f = open_input_file(path);
    if (!f) return {};
    std::string out;
    char buf[1 << 14];
    while (out.size() < max_bytes) {
        ssize_t n = read(f->fd(), buf, std::min(sizeof buf, max_bytes - out.size()));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    return out;
}

} // namespace gtrace
