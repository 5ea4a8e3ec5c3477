#include "foundation/bounded_call.h"

#include <atomic>
#include <system_error>
#include <thread>

namespace gtrace::bounded_detail {
namespace {

constexpr int kMaxStuck = 32; // threads asleep on file systems that do not answer
std::atomic<int> stuck{0};

} // namespace

bool start(std::function<void()> work) {
    if (stuck.load() >= kMaxStuck) return false;
    try {
        std::thread(std::move(work)).detach();
    } catch (const std::system_error&) {
        return false; // no thread to be had: the work is refused, as when too many are stuck
    }
    return true;
}

void gave_up() { stuck.fetch_add(1); }
void returned_late() { stuck.fetch_sub(1); }

} // namespace gtrace::bounded_detail
