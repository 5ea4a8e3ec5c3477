#include "foundation/sigbus_guard.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "foundation/exit_codes.h"
#include "foundation/printable.h"

namespace gtrace {
namespace {

constexpr int kSlots = 64;
struct Slot {
    std::atomic<uintptr_t> start{0}, end{0};
    char message[512]; // written before start/end are published
};
Slot slots[kSlots];
std::mutex slots_mutex;

void on_sigbus(int sig, siginfo_t* info, void*) {
    auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    for (Slot& s : slots) {
        uintptr_t start = s.start.load(std::memory_order_acquire), end = s.end.load(std::memory_order_acquire);
        if (start && addr >= start && addr < end) {
            (void)!write(STDERR_FILENO, s.message, strnlen(s.message, sizeof s.message));
            _exit(to_int(ExitCode::BadTrace));
        }
    }
    signal(sig, SIG_DFL); // not a guarded file's: the fault it is
    raise(sig);
}

void install_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, nullptr);
    });
}

} // namespace

SigbusGuard::SigbusGuard(const void* start, size_t length, const std::string& path) {
    if (!start || !length) return;
    install_once();
    std::lock_guard lock(slots_mutex);
    for (int i = 0; i < kSlots; ++i) {
        if (slots[i].start.load() != 0) continue;
        std::string line = "gtrace: error: " + printable(path) +
                           " was truncated while gtrace read it; read it again once whoever writes it is done\n";
        if (line.size() >= sizeof slots[i].message) line = line.substr(0, sizeof slots[i].message - 6) + "...\n";
        std::memcpy(slots[i].message, line.c_str(), line.size() + 1);
        slots[i].end.store(reinterpret_cast<uintptr_t>(start) + length, std::memory_order_release);
        slots[i].start.store(reinterpret_cast<uintptr_t>(start), std::memory_order_release);
        slot_ = i;
        return;
    }
}

SigbusGuard& SigbusGuard::operator=(SigbusGuard&& o) noexcept {
    if (this != &o) {
        this->~SigbusGuard();
        slot_ = o.slot_;
        o.slot_ = -1;
    }
    return *this;
}

SigbusGuard::~SigbusGuard() {
    if (slot_ < 0) return;
    std::lock_guard lock(slots_mutex);
    slots[slot_].start.store(0, std::memory_order_release);
    slots[slot_].end.store(0, std::memory_order_release);
    slot_ = -1;
}

} // namespace gtrace
