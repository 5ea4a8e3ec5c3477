#include "format/collective_names.h"

namespace gtrace {
namespace {

struct OpNames {
    const char* method;
    const char* shown;
};

constexpr OpNames kOps[] = {
    {nullptr, nullptr},
#define GT_COLL_NAMES(id, method, shown, flags) {method, shown},
    GT_COLLECTIVE_LIST(GT_COLL_NAMES)
#undef GT_COLL_NAMES
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == GT_COLL_COUNT);

struct BackendNames {
    const char* cls;
    const char* shown;
};

constexpr BackendNames kBackends[] = {
    {nullptr, nullptr},
#define GT_BACKEND_NAMES(id, cls, shown) {cls, shown},
    GT_COMM_BACKEND_LIST(GT_BACKEND_NAMES)
#undef GT_BACKEND_NAMES
};
static_assert(sizeof(kBackends) / sizeof(kBackends[0]) == GT_BACKEND_COUNT);

} // namespace

const char* collective_method(unsigned op) { return op < GT_COLL_COUNT ? kOps[op].method : nullptr; }
const char* collective_shown_name(unsigned op) { return op < GT_COLL_COUNT ? kOps[op].shown : nullptr; }
const char* backend_class(unsigned backend) { return backend < GT_BACKEND_COUNT ? kBackends[backend].cls : nullptr; }
const char* backend_name(unsigned backend) { return backend < GT_BACKEND_COUNT ? kBackends[backend].shown : nullptr; }

} // namespace gtrace
