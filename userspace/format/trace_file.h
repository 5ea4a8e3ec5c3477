// A trace file's bytes for JsonCursor: mapped, followed by the zero padding it needs. Pages a
// reader is done with are dropped from the process, so a multi-gigabyte trace costs no resident
// memory for itself. Anything but a regular file (a FIFO, /dev/zero) is refused: exit code 11. A
// partial trace (`writable`) can be closed in memory with close_at(); the file itself never changes.
#pragma once
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <algorithm>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "format/json_cursor.h"
#include "foundation/input_file.h"
#include "foundation/printable.h"
#include "foundation/privilege.h"
#include "foundation/result.h"
#include "foundation/sigbus_guard.h"

namespace gtrace {

class TraceFile {
public:
    static Result<TraceFile> open(const std::string& path, bool writable = false) {
        // Only a regular file: a FIFO or a device (/dev/zero) would block or never end. Under
        // sudo, only one the user who ran it could read.
        auto in = [&] {
            AsInvoker as_invoker;
            return open_input_file(path, ExitCode::BadTrace);
        }();
        if (!in) {
            if (in.error().code == ExitCode::BadTrace)
                return make_error(ExitCode::BadTrace, in.error().message + "; give the path of a trace file gtrace wrote");
            return make_error(ExitCode::Usage, in.error().message + "; give the path of a trace gtrace wrote");
        }
        TraceFile f;
        if (in->size() == 0) { // nothing to map: the padding alone (and a JSON error at byte 0)
            f.copy_.assign(JsonCursor::kPadding, '\0');
            return f;
        }
        if (auto shape = check_shape(*in, printable(path)); !shape) return shape.error();
        if (in->size() > SIZE_MAX / 2 || !f.map(in->fd(), static_cast<size_t>(in->size()), writable))
            return make_error(ExitCode::BadTrace, fmt::format("cannot map {} ({} bytes): {}; is it a trace gtrace wrote?", printable(path),
                                                              in->size(), strerror(errno)));
        f.guard_ = SigbusGuard(f.map_, f.size_, path); // truncated under us: one line and exit 11
        return f;
    }

    // Before a byte is scanned: a trace starts like JSON ('{' or '[' after blanks) or like a
    // Perfetto TracePacket (field 1, length-delimited: 0x0a), and is not mostly holes (a sparse
    // file of terabytes would be read, and cached, in full for nothing).
    static Result<void> check_shape(const InputFile& in, const std::string& shown) {
        char head[256];
        ssize_t n = pread(in.fd(), head, sizeof head, 0);
        size_t i = 0;
        while (n > 0 && i < static_cast<size_t>(n) && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) ++i;
        bool json = n > 0 && i < static_cast<size_t>(n) && (head[i] == '{' || head[i] == '[');
        bool proto = n > 0 && static_cast<unsigned char>(head[0]) == 0x0a;
        if (n > 0 && !json && !proto && i < static_cast<size_t>(n))
            return make_error(ExitCode::BadTrace, fmt::format("{} does not start like a trace: it is not valid JSON, nor a Perfetto protobuf; give the path of "
                                                              "a trace gtrace wrote", shown));
        constexpr uint64_t kSmall = 1 << 20;
        if (in.size() > kSmall) {
            uint64_t holes = hole_bytes(in);
            if (holes > in.size() / 2)
                return make_error(ExitCode::BadTrace, fmt::format("{} is mostly holes ({} of its {} bytes were never written); it is not a "
                                                                  "trace gtrace wrote", shown, holes, in.size()));
        }
        return {};
    }
    TraceFile() = default;
    TraceFile(TraceFile&& o) noexcept
        : map_(o.map_), map_len_(o.map_len_), size_(o.size_), copy_(std::move(o.copy_)), guard_(std::move(o.guard_)) {
        o.map_ = nullptr;
    }
    TraceFile& operator=(TraceFile&&) = delete;
    ~TraceFile() {
        if (map_) munmap(const_cast<char*>(map_), map_len_);
    }

    // Keeps the first `cut` bytes and puts `closing` after them (with the padding). For a file
    // opened `writable`: its mapping is private, so only this process sees the change.
    bool close_at(size_t cut, std::string_view closing) {
        if (map_ && cut + closing.size() + JsonCursor::kPadding > map_len_) return false;
        if (!map_) copy_.resize(std::max(copy_.size(), cut + closing.size() + JsonCursor::kPadding));
        char* p = const_cast<char*>(begin());
        memcpy(p + cut, closing.data(), closing.size());
        memset(p + cut + closing.size(), 0, JsonCursor::kPadding);
        size_ = cut + closing.size();
        return true;
    }

    const char* begin() const { return map_ ? map_ : copy_.data(); }
    const char* end() const { return begin() + size_; }
    size_t size() const { return size_; }

    // Drops, every 64 MiB, the pages before where one reader has got to.
    class Dropper {
    public:
        Dropper(const TraceFile& f, const char* from) : mapped_(f.map_ != nullptr), dropped_(align(from)) {}
        void done_before(const char* p) {
            if (!mapped_ || p - dropped_ < (64 << 20)) return;
            const char* upto = align(p);
            madvise(const_cast<char*>(dropped_), static_cast<size_t>(upto - dropped_), MADV_DONTNEED);
            dropped_ = upto;
        }

    private:
        static const char* align(const char* p) { return reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{0xFFFFF}); }
        bool mapped_;
        const char* dropped_;
    };

private:
    // The file over an anonymous (zero) mapping one page longer: the rest of the file's last page
    // and that page are the padding. The mapping is 1 MiB aligned, for the Dropper.
    bool map(int fd, size_t size, bool writable) {
        int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
        size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), align = 1 << 20;
        size_t len = (size + page - 1) / page * page + page;
        void* raw = mmap(nullptr, len + align, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) return false;
        char* base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + align - 1) & ~(align - 1));
        if (base > raw) munmap(raw, static_cast<size_t>(base - static_cast<char*>(raw)));
        munmap(base + len, static_cast<size_t>(static_cast<char*>(raw) + len + align - (base + len)));
        if (mmap(base, size, prot, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) {
            munmap(base, len);
            return false;
        }
        madvise(base, size, MADV_SEQUENTIAL);
        map_ = base, map_len_ = len, size_ = size;
        return true;
    }

    const char* map_ = nullptr;
    size_t map_len_ = 0, size_ = 0;
    std::string copy_;
    SigbusGuard guard_; // declared last: let go first, before the mapping is
};

} // namespace gtrace
