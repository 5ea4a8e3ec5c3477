// Attach mode: where the NVTX v3 tables of a running process are. Each module (executable or
// library) built with the header-only NVTX v3 holds its own table, nvtxGlobals_v3 — a hidden
// symbol, so only in the file's .symtab — that the agent can serve (collect/agent/nvtx_tables.h).
// A module whose .rodata names NVTX_INJECTION64_PATH uses NVTX; when its table cannot be found
// (its symbols stripped), its ranges cannot be captured after attach, and the capture says so.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "discover/proc_maps.h"
#include "discover/target_files.h"
#include "foundation/input_file.h"

namespace gtrace {

inline constexpr const char* kNvtxTableSymbol = "nvtxGlobals_v3";

struct NvtxModules {
    std::vector<std::pair<uint64_t, std::string>> tables; // address in the process, module path
    std::vector<std::string> unreachable;                   // modules using NVTX without a table symbol
};

class NvtxModuleScan {
public:
    NvtxModules find(int pid, const std::vector<Mapping>& maps, TargetFiles& files);

private:
    struct FileFacts {
        std::optional<uint64_t> table_offset; // file offset of nvtxGlobals_v3
        bool uses_nvtx = false;
    };
    static FileFacts read_file(const InputFile& file);
    std::map<std::pair<uint64_t, uint64_t>, FileFacts> files_; // by device and inode, read once
};

} // namespace gtrace
