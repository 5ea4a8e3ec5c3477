#include "decode/nvtx_range.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gtrace {
namespace {

template <typename T>
double as(uint64_t bits) {
    T v;
    std::memcpy(&v, &bits, sizeof v); // the low bytes of the union, as on x86-64
    return static_cast<double>(v);
}

std::optional<double> payload_of(uint8_t type, uint64_t bits) {
    double v;
    switch (type) {
    case 1: v = as<uint64_t>(bits); break; // NVTX_PAYLOAD_TYPE_UNSIGNED_INT64
    case 2: v = as<int64_t>(bits); break;  // INT64
    case 3: v = as<double>(bits); break;   // DOUBLE
    case 4: v = as<uint32_t>(bits); break; // UNSIGNED_INT32
    case 5: v = as<int32_t>(bits); break;  // INT32
    case 6: v = as<float>(bits); break;    // FLOAT
    default: return std::nullopt;
    }
    if (!std::isfinite(v)) return std::nullopt;
    return v;
}

} // namespace

std::optional<NvtxRange> decode_nvtx_range(uint32_t pid, const gt_gpu_header& h) {
    if (h.type != GT_GPU_NVTX_RANGE || h.size < sizeof(gt_nvtx_range)) return std::nullopt;
    const auto& r = reinterpret_cast<const gt_nvtx_range&>(h);
    size_t text = size_t{r.domain_len} + r.message_len;
    if (r.domain_len > GT_NVTX_DOMAIN_MAX || r.message_len > GT_NVTX_MESSAGE_MAX || sizeof(gt_nvtx_range) + text > h.size)
        return std::nullopt;
    auto info = std::make_shared<NvtxRangeInfo>();
    info->domain.assign(r.text, r.domain_len);
    info->category = r.category;
    info->payload = payload_of(r.payload_type, r.payload);
    info->end_tid = r.end_tid;
    info->push_pop = r.kind != GT_NVTX_START_END;
    NvtxRange range{pid, r.tid, r.start, std::max(r.start, r.end), std::string(r.text + r.domain_len, r.message_len), std::move(info)};
    if (range.name.empty()) range.name = "(NVTX range)";
    return range;
}

} // namespace gtrace
