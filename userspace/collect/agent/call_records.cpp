#include "collect/agent/call_records.h"

#include <array>
#include <atomic>
#include <unordered_map>

#include "collect/agent_ring.h"

namespace gtrace::agent {
namespace {

std::atomic<bool> g_from_records{false};
bool g_entry_marks = false; // entry callbacks run: every call the agent records left its slot

// Stacks by correlation id, from the entry callback to the buffer thread: a record comes up to
// a flush period (500 ms) after its call's entry, so the table holds more calls than a busy
// process makes in that time; an overwritten slot costs that call its stack, counted.
struct StackSlot {
    std::atomic<uint64_t> key{0}; // 1 << 63 | py_status << 32 | correlation; 0: empty
    std::atomic<uint64_t> id{0};
};
std::array<StackSlot, kCallStackSlots> g_stacks;

uint64_t slot_key(uint32_t correlation, uint8_t py_status) {
    return 1ull << 63 | uint64_t{py_status} << 32 | correlation;
}

enum class Slot { Found, Missed, Absent };

// The stack its entry callback left for this call: Missed when a later call took the slot since,
// Absent when none was left (the call entered before the agent began recording).
Slot stack_of(uint32_t correlation, CallStack& stack) {
    StackSlot& s = g_stacks[correlation % kCallStackSlots];
    uint64_t key = s.key.load(std::memory_order_acquire);
    uint64_t id = s.id.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (key && static_cast<uint32_t>(key) == correlation && s.key.load(std::memory_order_relaxed) == key) {
        stack = {id, static_cast<uint8_t>(key >> 32)};
        return Slot::Found;
    }
    return key && static_cast<uint32_t>(key) > correlation ? Slot::Missed : Slot::Absent;
}

struct Waiting {
    ApiRecord record;
    uint64_t pass = 0;
};
std::unordered_map<uint32_t, Waiting> g_waiting; // per thread: a driver call not yet known outermost
uint64_t g_pass = 0;

void send(gt_agent_ring* ring, const ApiRecord& c) {
    CallStack stack;
    Slot slot = stack_of(c.correlation, stack);
    // Entered before the agent began: not its call (the uprobes, still on then, recorded it).
    if (slot == Slot::Absent && g_entry_marks) return;
    if (c.start < __atomic_load_n(&ring->calls_since_ns, __ATOMIC_ACQUIRE)) return;
    if (slot == Slot::Missed) ++ring->call_stacks_missed;
    write_call_record(ring, c, stack);
}

bool encloses(const ApiRecord& outer, const ApiRecord& inner) {
    return outer.start <= inner.start && inner.end <= outer.end;
}

} // namespace

void write_call_record(gt_agent_ring* ring, const ApiRecord& c, CallStack stack) {
    uint64_t pos = 0;
    auto* r = agent_ring_reserve_record<gt_gpu_call>(ring, sizeof(gt_gpu_call), GT_GPU_CALL, c.correlation, &pos);
    if (!r) return;
    r->start = c.start;
    r->end = c.end;
    r->py_stack = stack.id;
    r->tid = c.tid;
    r->api = static_cast<uint16_t>(c.api);
    r->py_status = stack.py_status;
    r->ret = c.ret;
    agent_ring_commit(ring, pos, r->h.size);
}

bool calls_from_records() { return g_from_records.load(std::memory_order_acquire); }
void set_calls_from_records(bool on, bool entry_marks) {
    g_entry_marks = entry_marks;
    g_from_records.store(on, std::memory_order_release);
}

void remember_stack(uint32_t correlation, CallStack stack) {
    StackSlot& s = g_stacks[correlation % kCallStackSlots];
    s.key.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.id.store(stack.id, std::memory_order_relaxed);
    s.key.store(slot_key(correlation, stack.py_status), std::memory_order_release);
}

void call_from_record(gt_agent_ring* ring, const ApiRecord& record) {
    // A thread's records complete in order, a nested call's before its caller's: a driver call
    // waits for the thread's next record, which either encloses it (it was nested: dropped) or
    // does not (it was the application's own call, as cuBLAS's launches are).
    if (auto it = g_waiting.find(record.tid); it != g_waiting.end()) {
        if (record.driver || !encloses(record, it->second.record)) send(ring, it->second.record);
        g_waiting.erase(it);
    }
    if (record.driver) g_waiting[record.tid] = {record, g_pass};
    else send(ring, record);
}

void send_waiting_calls(gt_agent_ring* ring, bool all) {
    ++g_pass;
    for (auto it = g_waiting.begin(); it != g_waiting.end();) {
        if (all || it->second.pass + 1 < g_pass) {
            if (ring) send(ring, it->second.record);
            it = g_waiting.erase(it);
        } else {
            ++it;
        }
    }
}

void reset_call_records() {
    g_waiting.clear();
    for (auto& s : g_stacks) s.key.store(0, std::memory_order_relaxed);
}

} // namespace gtrace::agent
