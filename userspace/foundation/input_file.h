// Opening the files gtrace reads, on its own behalf (traces for report) or a traced process's
// (its ELF objects, its /proc files). gtrace runs as root and the paths may be chosen by a
// hostile user: a FIFO, a device or a socket at such a path must never block gtrace or be read,
// so every open is non-blocking and anything but a regular file is refused after fstat.
#pragma once
#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "foundation/result.h"

namespace gtrace {

class InputFile {
public:
    InputFile() = default;
    InputFile(InputFile&& o) noexcept : fd_(o.fd_), st_(o.st_) { o.fd_ = -1; }
    InputFile& operator=(InputFile&& o) noexcept;
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;
    ~InputFile();

    int fd() const { return fd_; }
    const struct stat& stat() const { return st_; }
    uint64_t size() const { return static_cast<uint64_t>(st_.st_size); }
    // A path naming exactly this open file (/proc/self/fd/N), for APIs that take paths (libelf,
    // uprobes): the kernel resolves it to the same inode, whatever happens to the original path.
    std::string fd_path() const;
    // Takes `fd` (closed on failure too); a regular file only, else `not_regular` naming `shown`.
    static Result<InputFile> adopt(int fd, const std::string& shown, ExitCode not_regular = ExitCode::Internal);

private:
    friend Result<InputFile> open_input_file(const std::string& path, ExitCode not_regular);
    int fd_ = -1;
    struct stat st_ {};
};

// Opens `path` read-only (O_NONBLOCK, O_CLOEXEC, O_NOCTTY) and requires a regular file. Errors:
// Usage when it cannot be opened; `not_regular` when it is a FIFO, device, socket or directory.
Result<InputFile> open_input_file(const std::string& path, ExitCode not_regular = ExitCode::Internal);

// The whole of a small regular file (/proc files, whose size fstat does not know), at most
// `max_bytes`: a longer one is cut there. Empty when it cannot be opened or is not regular.
std::string read_input_file(const std::string& path, size_t max_bytes);

// Where `needle` first occurs in the file's bytes [offset, offset + size), read a chunk at a time
// (no buffer sized by what a file or a mapping claims): its file offset, or nullopt.
std::optional<uint64_t> find_in_file(int fd, uint64_t offset, uint64_t size, std::string_view needle);

// How many of the file's bytes are holes (never written: a sparse file reads them as zeros),
// from the file system's SEEK_DATA/SEEK_HOLE map, looked at up to a bounded number of extents
// (the rest judged by the part seen).
uint64_t hole_bytes(const InputFile& file);

// "a FIFO", "a character device", ... for messages.
const char* file_type_name(mode_t mode);

} // namespace gtrace
