#include "output/pftrace_interning.h"

#include <algorithm>

#include <fmt/format.h>

#include "gtrace/pystack.h"
#include "format/proto_encoder.h"

namespace gtrace {
namespace {

using SL = pftrace::SourceLocation;
using FR = pftrace::Frame;
constexpr uint64_t kFrameKindInterpreted = FR::KIND_INTERPRETED;

void append_key(std::string& key, std::string_view s) {
    key += s;
    key += '\0';
}

} // namespace

uint64_t PftraceInterning::intern(Table& table, Field field, std::string_view s) {
    if (auto it = table.find(s); it != table.end()) return it->second;
    uint64_t iid = table.size() + 1;
    table.emplace(std::string(s), iid);
    proto::Encoder e(pending_);
    e.begin(field); // EventName, EventCategory, DebugAnnotationName, InternedString: {iid, name or str}
    e.varint(pftrace::EventName::kIid, iid);
    e.bytes(pftrace::EventName::kName, s);
    e.end();
    return iid;
}

uint64_t PftraceInterning::source_location(const PyFrame& f) {
    key_.clear();
    append_key(key_, f.qualname);
    append_key(key_, f.filename);
    key_ += std::to_string(f.line);
    if (auto it = source_locations_.find(key_); it != source_locations_.end()) return it->second;
    uint64_t iid = source_locations_.size() + 1;
    source_locations_.emplace(key_, iid);
    proto::Encoder e(pending_);
    e.begin(kSourceLocations);
    e.varint(SL::kIid, iid);
    e.bytes(SL::kFileName, f.filename);
    e.bytes(SL::kFunctionName, f.qualname);
    e.varint(SL::kLineNumber, static_cast<uint32_t>(f.line));
    e.end();
    return iid;
}

uint64_t PftraceInterning::frame(const PyFrame& f, bool python) {
    uint64_t function = intern(function_names_, kFunctionNames, f.qualname);
    uint64_t path = f.filename.empty() ? 0 : intern(source_paths_, kSourcePaths, f.filename);
    key_.clear();
    fmt::format_to(std::back_inserter(key_), "{} {} {} {}", function, path, f.line, python);
    if (auto it = frames_.find(key_); it != frames_.end()) return it->second;
    uint64_t iid = frames_.size() + 1;
    frames_.emplace(key_, iid);
    proto::Encoder e(pending_);
    e.begin(kFrames);
    e.varint(FR::kIid, iid);
    e.varint(FR::kFunctionNameId, function);
    if (path) e.varint(FR::kSourcePathIid, path);
    if (f.line > 0) e.varint(FR::kLineNumber, static_cast<uint32_t>(f.line));
    if (python) e.varint(FR::kKind, kFrameKindInterpreted);
    e.end();
    return iid;
}

void PftraceInterning::remember(const PyStackRef& ref, uint64_t iid) {
    // A stack only this table still holds belongs to a process gone (or exec'ed): no event will
    // name it again, and its frames stay interned by their bytes. Let such stacks go once the
    // table has doubled, so that a long capture of short-lived processes does not grow for ever.
    if (stack_refs_.size() >= sweep_at_) {
        std::erase_if(stack_refs_, [](const auto& entry) { return entry.second.first.use_count() == 1; });
        sweep_at_ = std::max<size_t>(kFirstSweep, 2 * stack_refs_.size());
    }
    stack_refs_.emplace(ref.get(), std::pair{ref, iid});
}

uint64_t PftraceInterning::callstack(const PyStackRef& ref) {
    if (auto it = stack_refs_.find(ref.get()); it != stack_refs_.end()) return it->second.second;
    // A new PyStack may repeat frames interned before (another id of the same stack, or a
    // process that exec'ed): keyed by its frames' bytes too.
    const PyStack& stack = *ref;
    std::string key;
    key.reserve(stack.frames.size() * 64);
    for (const PyFrame& f : stack.frames) {
        append_key(key, f.qualname);
        append_key(key, f.filename);
        key += std::to_string(f.line);
        key += '\0';
    }
    if (stack.truncated) key += "[truncated]";
    if (auto it = callstacks_.find(key); it != callstacks_.end()) {
        remember(ref, it->second);
        return it->second;
    }
    frame_ids_.clear();
    if (stack.truncated)
        frame_ids_.push_back(frame({fmt::format("[truncated: deeper than {} frames]", GT_PY_MAX_FRAMES), {}, 0}, false));
    for (auto f = stack.frames.rbegin(); f != stack.frames.rend(); ++f) frame_ids_.push_back(frame(*f, true));
    uint64_t iid = callstacks_.size() + 1;
    callstacks_.emplace(std::move(key), iid);
    remember(ref, iid);
    proto::Encoder e(pending_);
    e.begin(kCallstacks);
    e.varint(pftrace::Callstack::kIid, iid);
    for (uint64_t id : frame_ids_) e.varint(pftrace::Callstack::kFrameIds, id); // repeated, not packed: as the schema declares it
    e.end();
    return iid;
}

size_t PftraceInterning::entries() const {
    return names_.size() + categories_.size() + annotation_names_.size() + string_values_.size() + function_names_.size() +
           source_paths_.size() + source_locations_.size() + frames_.size() + callstacks_.size();
}

} // namespace gtrace
