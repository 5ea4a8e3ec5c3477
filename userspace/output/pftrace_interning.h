// The interning state of one Perfetto packet sequence: event names, categories, debug
// annotation names and string values, source locations, function names, source paths, frames
// and callstacks, each given an id (iid, from 1) the first time the sequence uses it. New
// entries collect in `pending()`, the InternedData of the packet being written, which the
// writer puts into that packet: a packet only ever refers to entries of its own or earlier
// packets of its sequence, so a trace cut at any packet boundary stays consistent.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "decode/python_stacks.h"
#include "pftrace_field_numbers.h" // generated from format/pftrace.proto

namespace gtrace {

class PftraceInterning {
public:
    uint64_t event_name(std::string_view s) { return intern(names_, kEventNames, s); }
    uint64_t category(std::string_view s) { return intern(categories_, kCategories, s); }
    uint64_t annotation_name(std::string_view s) { return intern(annotation_names_, kAnnotationNames, s); }
    uint64_t string_value(std::string_view s) { return intern(string_values_, kStringValues, s); }
    // SourceLocation{file_name, function_name, line_number}.
    uint64_t source_location(const PyFrame& f);
    // Callstack of Frames, outermost first as Perfetto has it; `stack` is innermost first, and a
    // truncated stack gets an outermost frame that says so. Stacks are interned by the capture
    // already (one PyStack per BPF stack id): a stack seen before costs one pointer lookup.
    uint64_t callstack(const PyStackRef& stack);

    // InternedData fields for the packet being written (empty: none new); clear after use.
    std::string& pending() { return pending_; }
    size_t entries() const;
    size_t stacks_held() const { return stack_refs_.size(); }

private:
    // InternedData field numbers (generated from pftrace.proto).
    using ID = pftrace::InternedData;
    enum Field : uint32_t {
        kCategories = ID::kEventCategories,
        kEventNames = ID::kEventNames,
        kAnnotationNames = ID::kDebugAnnotationNames,
        kSourceLocations = ID::kSourceLocations,
        kFunctionNames = ID::kFunctionNames,
        kFrames = ID::kFrames,
        kCallstacks = ID::kCallstacks,
        kSourcePaths = ID::kSourcePaths,
        kStringValues = ID::kDebugAnnotationStringValues,
    };
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    using Table = std::unordered_map<std::string, uint64_t, Hash, std::equal_to<>>;
    // `name_field`: 2 for the {iid, name} messages, 2 as well for InternedString's `str`.
    uint64_t intern(Table& table, Field field, std::string_view s);
    uint64_t frame(const PyFrame& f, bool python);

    Table names_, categories_, annotation_names_, string_values_, function_names_, source_paths_;
    Table source_locations_, frames_, callstacks_; // keyed by their fields' bytes
    // The capture's stacks as met, holding them so that no address is reused for another stack.
    std::unordered_map<const PyStack*, std::pair<PyStackRef, uint64_t>> stack_refs_;
    static constexpr size_t kFirstSweep = 4096;
    size_t sweep_at_ = kFirstSweep;
    void remember(const PyStackRef& ref, uint64_t iid);
    std::string pending_, key_;
    std::vector<uint64_t> frame_ids_;
};

} // namespace gtrace
