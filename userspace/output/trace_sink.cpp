#include "output/trace_sink.h"

#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace gtrace {
namespace {

constexpr size_t kFlushAt = 1 << 20;
constexpr uint64_t kMarkEvery = 64 << 10;
constexpr uint64_t kTailSlack = 16 << 10; // a few file system blocks beyond the closing bytes

// Writes all of `bytes` at `offset`; 0, or the errno of the write that failed. `reached`: the
// end of what was written.
int write_at(int fd, uint64_t offset, std::string_view bytes, uint64_t& reached) {
    size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            reached = offset + done;
            return n < 0 ? errno : ENOSPC;
        }
        done += static_cast<size_t>(n);
    }
    reached = offset + done;
    return 0;
}

} // namespace

Result<TraceSink> TraceSink::create(const std::string& path, bool force, std::string_view header) {
    auto file = OutputFile::create(path, force, partial_path_of(path));
    if (!file) return file.error();
    // Held until the sink closes (or gtrace dies): tells `gtrace recover` and a later capture
    // that this partial is still being written.
    flock(file->fd(), LOCK_EX | LOCK_NB);
    TraceSink s(std::move(*file));
    s.buf_.assign(header);
    s.flush();
    if (s.failed())
        return make_error(write_error_code(s.error_), fmt::format("cannot write {}: {}; free space or choose another -o path",
                                                                  s.partial_path(), strerror(s.error_)));
    s.last_ = {s.written_, 0};
    s.marks_.push_back(s.last_);
    return s;
}

bool TraceSink::commit() {
    if (failed()) return false;
    last_ = {written_ + buf_.size(), ++units_};
    bool marked = last_.offset - marks_.back().offset >= kMarkEvery;
    if (marked) {
        marks_.push_back(last_);
        // A cut goes back from the end in steps that grow 4x: the old part of a long capture
        // needs fewer marks. Every other one of the older half goes (the header's end stays).
        if (marks_.size() > kMarksKept) { // then thinned: a trace of any size keeps at most this many
            size_t half = marks_.size() / 2, out = 1;
            for (size_t i = 1; i < marks_.size(); ++i)
                if (i >= half || i % 2 == 0) marks_[out++] = marks_[i];
            marks_.resize(out);
        }
    }
    if (buf_.size() >= kFlushAt) flush();
    return marked;
}

std::vector<uint64_t> TraceSink::marked_units() const {
    std::vector<uint64_t> out;
    for (const Boundary& b : marks_) out.push_back(b.units);
    return out;
}

void TraceSink::flush() {
    if (failed() || buf_.empty()) return;
    error_ = write_at(file_.fd(), written_, buf_, written_);
    buf_.clear();
}

Result<SinkCut> TraceSink::cut_back(const Closing& closing) {
    // Boundaries whose bytes all reached the file, the latest last.
    std::vector<Boundary> kept = marks_;
    kept.push_back(last_);
    std::erase_if(kept, [&](const Boundary& b) { return b.offset > written_; });
    const uint64_t end = written_;
    uint64_t room = 0; // first the latest boundary (an I/O error need not mean a full disk), then further back
    for (size_t i = kept.size(); i-- > 0;) {
        if (end - kept[i].offset < room && i > 0) continue;
        SinkCut cut{strerror(error_), kept[i].units, kept[i].offset};
        std::string tail = closing(&cut);
        uint64_t reached = 0;
        if (ftruncate(file_.fd(), static_cast<off_t>(kept[i].offset)) == 0 &&
            write_at(file_.fd(), kept[i].offset, tail, reached) == 0 && fsync(file_.fd()) == 0)
            return cut;
        room = std::max(room * 4, tail.size() + kTailSlack);
    }
    if (ftruncate(file_.fd(), static_cast<off_t>(kept.front().offset)) != 0) {
        // Nothing to do: the partial stays as it is, readable up to its last whole unit.
    }
    file_.keep_temp();
    return make_error(ExitCode::WriteFailed, fmt::format("writing {} failed: {}; not even an empty trace could be written; "
                                                         "free space or write elsewhere with -o",
                                                         path(), strerror(error_)));
}

Result<std::optional<SinkCut>> TraceSink::finish(const Closing& closing) {
    std::optional<SinkCut> cut;
    if (!failed()) {
        buf_ += closing(nullptr);
        flush();
        if (!failed() && fsync(file_.fd()) != 0) error_ = errno;
    }
    if (failed()) {
        auto c = cut_back(closing);
        if (!c) return c.error();
        cut = std::move(*c);
    }
    if (auto r = file_.commit(); !r) {
        file_.keep_temp();
        return make_error(r.error().code, fmt::format("{}; the trace is complete in {}", r.error().message, partial_path()));
    }
    return cut;
}

} // namespace gtrace
