// Finds the CPython interpreter in a process (in the executable or a libpython3.X.so), its
// version, and the layout gtrace needs to walk its frames from BPF and to read its code objects.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "foundation/result.h"
#include "discover/proc_maps.h"
#include "discover/target_files.h"
#include "gtrace/pystack.h"

namespace gtrace {

// Where code-object and string fields live for one CPython version (bytes).
struct PyCodeLayout {
    uint16_t filename, name, qualname; // qualname 0: none (<=3.10)
    uint16_t firstlineno, linetable;
    uint16_t code_adaptive; // 0: none (<=3.10)
    uint16_t ascii_data;    // compact ASCII string data
};

struct PythonRuntime {
    int major = 0, minor = 0;
    std::string object; // file holding the interpreter
    uint64_t runtime_addr = 0;    // _PyRuntime in the process
    uint64_t code_type_addr = 0;  // PyCode_Type in the process (validates code objects)
    gt_py_layout layout{};
    PyCodeLayout code{};
    std::string version() const { return std::to_string(major) + "." + std::to_string(minor); }
};

struct PythonDetection {
    std::optional<PythonRuntime> runtime; // set when the process runs a supported CPython
    std::string unsupported;              // why not, when it runs one gtrace cannot walk
};

// The interpreter among pid's mappings, its files opened as pid maps them (target_files.h).
PythonDetection detect_python(int pid, const std::vector<Mapping>& maps, TargetFiles& files);

// (major, minor) of a file named like CPython's executable or library: python3.11,
// libpython3.12.so.1.0, /usr/bin/python3.9d; nullopt for any other name.
std::optional<std::pair<int, int>> python_file_version(std::string_view path);

// offsetof(struct pthread, specific_1stblock) in this machine's glibc, found by setting a key in
// gtrace's own thread and looking for it; nullopt if it cannot be found.
std::optional<uint16_t> glibc_pthread_specific_offset();

} // namespace gtrace
