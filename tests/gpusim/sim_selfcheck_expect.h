// gpusim_selfcheck: what a workload step must produce, per API call, and the check of it against
// the callbacks, the activity records and GTSIM_LOG (phases 5 and 6).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sim_selfcheck.h"
#include "workload/paths.h"

namespace selfcheck {

// What a call must do: the workload's description (domain, name, nested driver call, ops).
using OpExpect = gtsim_workload::Op;
using CallExpect = gtsim_workload::Call;

// A call as the callbacks showed it: owner enter/exit, and the callbacks in between.
struct ObservedCall {
    uint32_t domain = 0, cbid = 0, correlation = 0, tid = 0;
    std::string function;
    std::vector<ApiEvent> inner;
};
// The outermost calls in events()[first, last); false if the enters and exits do not pair up.
bool split_calls(size_t first, size_t last, std::vector<ObservedCall>* out);

void clear_expectations();
// Runs fn on this thread and remembers that it must make exactly `calls`, in order.
void expect(std::vector<CallExpect> calls, const std::function<void()>& fn);
// Checks every remembered step (after a forced flush); returns the number of calls checked.
size_t check_expectations(const std::string& log_path);

} // namespace selfcheck
