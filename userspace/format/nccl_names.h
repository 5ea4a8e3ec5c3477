// The names of NCCL's API functions, datatypes and reduction ops (nccl.h, NCCL 2.x; the API table
// is gtrace/comm.h's), shared by the probes that find the functions (attach/comm_probes.h), the
// decoding that names their calls, the writers and the readers of the traces.
#pragma once
#include <cstdint>
#include <string_view>

#include "gtrace/comm.h"

namespace gtrace {

// "ncclAllReduce" for GT_NCCL_ALL_REDUCE; nullptr when unknown.
const char* nccl_api_symbol(unsigned api);
// The layout of gtrace/comm.h's GT_NCCL_API_LIST (GT_NCCL_ARGS, GT_NCCL_COMM_OUT).
uint32_t nccl_api_layout(unsigned api);
// GT_NCCL_* for "ncclAllReduce" or its profiling twin "pncclAllReduce"; GT_NCCL_UNKNOWN else.
unsigned nccl_api_from_symbol(std::string_view name);
// Whether the call makes a communicator (its nranks and rank are in the call's count and peer).
bool nccl_api_creates_comm(unsigned api);
// Whether the call moves data on a communicator (not a group call or a communicator's creation).
bool nccl_api_moves_data(unsigned api);

// ncclDataType_t: "float32", its size in bytes; nullptr / 0 when not one of NCCL's.
const char* nccl_datatype_name(unsigned type);
unsigned nccl_datatype_size(unsigned type);
// ncclRedOp_t: "sum"; "premul_sum/custom" for one made by ncclRedOpCreate*; nullptr for 255 (none).
const char* nccl_redop_name(unsigned op);

} // namespace gtrace
