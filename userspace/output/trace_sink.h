// The bytes of a trace on their way to disk, whatever the format (Chrome JSON, Perfetto
// protobuf): they stream into `<output>.partial` beside the output while the capture runs and
// are renamed into place once the stream is closed, so the output path only ever holds a
// complete trace, and a capture killed with -9 leaves a partial that `gtrace recover` completes.
//
// The writer marks unit boundaries (an event, a packet) with commit(). A write error (disk full,
// quota, I/O error) stops all further writing; finish() then cuts the file back to a boundary
// far enough from the end to leave room for the closing bytes, so that the output is still a
// complete, valid, shorter trace. The partial file is locked while its capture runs.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "foundation/output_file.h"
#include "foundation/result.h"

namespace gtrace {

// What a write error cut off: the stream keeps its first units_kept units.
struct SinkCut {
    std::string error; // strerror of the failed write
    uint64_t units_kept = 0;
    uint64_t offset = 0; // where the units kept end
};

class TraceSink {
public:
    static constexpr size_t kMarksKept = 4096; // boundaries a cut may go back to, at most
    // Creates `<path>.partial` (see OutputFile; `force` discards a killed capture's partial) and
    // writes `header`, the unit-less start of the stream. A full disk fails here already.
    static Result<TraceSink> create(const std::string& path, bool force, std::string_view header);

    void append(std::string_view bytes) {
        if (!failed()) buf_.append(bytes);
    }
    // Everything appended so far is whole units. True when this boundary is one a cut may go back
    // to (about every 64 KiB; the oldest are thinned out: marked_units() says which are kept).
    bool commit();
    std::vector<uint64_t> marked_units() const;
    // Pushes the buffered bytes to the file (also done as the buffer fills).
    void flush();

    bool failed() const { return error_ != 0; }
    int error() const { return error_; }
    uint64_t units() const { return units_; }
    const std::string& path() const { return file_.path(); }
    const std::string& partial_path() const { return file_.temp_path(); }
    // Reads the partial being written (through its fd: its directory's path may lead elsewhere now).
    std::string readable_partial_path() const { return file_.readable_path(); }

    // `closing(cut)` gives the bytes that end the stream after the units kept (cut: null when
    // nothing was lost). Closes the stream and renames it into place; returns the cut, if any.
    // Errors: nothing at all could be kept (WriteFailed, the partial left as it is), or the
    // rename failed (the complete trace stays at the partial path).
    using Closing = std::function<std::string(const SinkCut* cut)>;
    Result<std::optional<SinkCut>> finish(const Closing& closing);

private:
    explicit TraceSink(OutputFile file) : file_(std::move(file)) {}
    struct Boundary {
        uint64_t offset = 0, units = 0;
    };
    Result<SinkCut> cut_back(const Closing& closing);

    OutputFile file_;
    std::string buf_;
    uint64_t written_ = 0; // bytes in the file
    uint64_t units_ = 0;
    int error_ = 0;
    Boundary last_;                // the latest boundary
    std::vector<Boundary> marks_;  // boundaries about every kMarkEvery bytes, the header's end first
};

} // namespace gtrace
