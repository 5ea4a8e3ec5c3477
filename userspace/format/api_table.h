// The probed CUDA API as userspace sees it: names and capture flags by api id.
#pragma once
#include <array>
#include <string_view>

#include "gtrace/cuda_api.h"

namespace gtrace {

struct ApiInfo {
    gt_cuda_api id;
    std::string_view name;
    unsigned caps;
    gt_api_decode decode;
};

inline constexpr std::array<ApiInfo, GT_API_COUNT> kApis = {{
#define GT_API_INFO(id, symbol, caps, decode) {GT_API_##id, symbol, caps, decode},
    GT_CUDA_API_LIST(GT_API_INFO)
#undef GT_API_INFO
}};

inline std::string_view api_name(unsigned id) { return id < kApis.size() ? kApis[id].name : "unknown"; }
inline gt_api_decode api_decode(unsigned id) { return id < kApis.size() ? kApis[id].decode : GT_DEC_NONE; }

// Whether a successful call puts work on the GPU (a kernel, copy, set or graph), by its family:
// synchronizations, allocations and lookups make none.
inline bool api_issues_gpu_work(unsigned id) {
    gt_api_decode d = api_decode(id);
    return (d >= GT_DEC_LAUNCH_RT && d <= GT_DEC_SET_OTHER) || d == GT_DEC_GRAPH;
}

} // namespace gtrace
