// Turns the (code object, instruction) pairs recorded in BPF into "qualname (file:line)":
// reads each code object once with process_vm_readv, caches it per process, checks a cached
// entry still describes the same code object on reuse, and maps instructions to lines with the
// version's line table format.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "discover/python_runtime.h"
#include "gtrace/pystack.h"
#include "foundation/process_observer.h"

namespace gtrace {

struct PyFrame {
    std::string qualname, filename;
    int line = 0;
    // "qualname (file:line)"; a frame without a file (native, or a marker) is its name alone.
    std::string text() const;
    bool operator==(const PyFrame&) const = default;
};

// Line tables, by format (exposed for tests). `offset` is in bytes of bytecode.
int line_from_lnotab(const std::string& table, int firstlineno, uint64_t offset);    // 3.9
int line_from_linetable(const std::string& table, int firstlineno, uint64_t offset); // 3.10
int line_from_locations(const std::string& table, int firstlineno, uint64_t offset); // 3.11+

// Thread-safe (one lock): stacks may be symbolized on a thread of their own.
class PythonFrames final : public ProcessObserver {
public:
    void set_runtime(uint32_t pid, const PythonRuntime& rt);
    void forget_process(uint32_t pid);
    void process_exec(uint32_t pid) override { forget_process(pid); }
    void process_exited(uint32_t pid) override { forget_process(pid); }
    bool has_runtime(uint32_t pid) const;

    // Symbolized stack of a complete walk, innermost first; empty if any frame could not be read
    // consistently (a torn read is dropped, never shown).
    std::vector<PyFrame> symbolize(const gt_py_stack_event& e);
    uint64_t torn_stacks() const;

private:
    struct Code {
        std::string qualname, filename, table;
        int32_t firstlineno = 0;
        uint64_t code_type = 0;
    };
    struct Process {
        PythonRuntime rt;
        std::unordered_map<uint64_t, Code> codes;
    };
    const Code* code_at(Process& p, uint32_t pid, uint64_t addr);
    void revalidate(uint32_t pid, Process& p, const gt_py_stack_event& e);

    mutable std::mutex mutex_;
    std::unordered_map<uint32_t, Process> processes_;
    uint64_t torn_ = 0;
};

// The innermost frame outside torch, CUDA bindings and ctypes: where user code made the call.
const PyFrame* source_frame(const std::vector<PyFrame>& stack);

} // namespace gtrace
