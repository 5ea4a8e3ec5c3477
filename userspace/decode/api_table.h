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
};

inline constexpr std::array<ApiInfo, GT_API_COUNT> kApis = {{
#define GT_API_INFO(id, symbol, caps) {GT_API_##id, symbol, caps},
    GT_CUDA_API_LIST(GT_API_INFO)
#undef GT_API_INFO
}};

inline std::string_view api_name(unsigned id) { return id < kApis.size() ? kApis[id].name : "unknown"; }

} // namespace gtrace
