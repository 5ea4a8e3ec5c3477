#include "format/nccl_names.h"
#include <iterator>

namespace gtrace {
namespace {

struct Api {
    const char* symbol;
    uint32_t layout;
};

constexpr Api kApis[] = {
    {nullptr, 0},
#define GT_NCCL_NAMES(id, name, layout) {"nccl" name, layout},
    GT_NCCL_API_LIST(GT_NCCL_NAMES)
#undef GT_NCCL_NAMES
};
static_assert(sizeof(kApis) / sizeof(kApis[0]) == GT_NCCL_COUNT);

struct Type {
    const char* name;
    unsigned size;
};

// ncclDataType_t's values, in order (nccl.h: ncclInt8 = 0 ... ncclFloat8e5m2 = 11).
constexpr Type kTypes[] = {{"int8", 1},    {"uint8", 1},   {"int32", 4},    {"uint32", 4},
                           {"int64", 8},   {"uint64", 8},  {"float16", 2},  {"float32", 4},
                           {"float64", 8}, {"bfloat16", 2}, {"float8e4m3", 1}, {"float8e5m2", 1}};

// ncclRedOp_t's built-in values (nccl.h: ncclSum = 0 ... ncclAvg = 4); ncclNumOps (5) and above
// are made at run time by ncclRedOpCreatePreMulSum.
constexpr const char* kRedOps[] = {"sum", "prod", "max", "min", "avg"};

} // namespace

const char* nccl_api_symbol(unsigned api) { return api < GT_NCCL_COUNT ? kApis[api].symbol : nullptr; }
uint32_t nccl_api_layout(unsigned api) { return api < GT_NCCL_COUNT ? kApis[api].layout : 0; }

unsigned nccl_api_from_symbol(std::string_view name) {
    if (name.starts_with("pnccl")) name.remove_prefix(1);
    for (unsigned api = 1; api < GT_NCCL_COUNT; ++api)
        if (name == kApis[api].symbol) return api;
    return GT_NCCL_UNKNOWN;
}

bool nccl_api_creates_comm(unsigned api) {
    return api == GT_NCCL_COMM_INIT_RANK || api == GT_NCCL_COMM_INIT_RANK_CONFIG || api == GT_NCCL_COMM_INIT_RANK_SCALABLE;
}

bool nccl_api_moves_data(unsigned api) {
    return api != GT_NCCL_UNKNOWN && api < GT_NCCL_COUNT && api != GT_NCCL_GROUP_START && api != GT_NCCL_GROUP_END &&
           !nccl_api_creates_comm(api);
}

const char* nccl_datatype_name(unsigned type) { return type < std::size(kTypes) ? kTypes[type].name : nullptr; }
unsigned nccl_datatype_size(unsigned type) { return type < std::size(kTypes) ? kTypes[type].size : 0; }

const char* nccl_redop_name(unsigned op) {
    if (op < std::size(kRedOps)) return kRedOps[op];
    return op == 255 ? nullptr : "premul_sum/custom";
}

} // namespace gtrace
