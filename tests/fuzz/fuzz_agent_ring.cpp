// gtrace's end of an agent's ring (collect/agent_ring.h), which a hostile traced process writes:
// the input is the consumer's tail (8 bytes, little-endian), how far the head is past it (2 bytes)
// and the records; each record read is decoded as the capture decodes GPU work
// (decode/gpu_activity.cpp).
#include <cstring>
#include <vector>

#include "collect/agent_ring.h"
#include "decode/gpu_activity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gtrace;
    constexpr uint64_t kCap = 4096; // a power of two, as gtrace measures it from the memfd
    if (size < 10) return 0;
    alignas(64) static uint8_t memory[GT_AGENT_DATA_OFFSET + kCap];
    std::memset(memory, 0, sizeof memory);
    auto* ring = reinterpret_cast<gt_agent_ring*>(memory);
    uint64_t tail = 0;
    uint16_t ahead = 0;
    std::memcpy(&tail, data, 8);
    std::memcpy(&ahead, data + 8, 2);
    ring->tail = tail;
    ring->head = tail + ahead;
    ring->data_bytes = ~uint64_t{0}; // never trusted
    std::memcpy(agent_ring_data(ring), data + 10, std::min<size_t>(size - 10, kCap));
    size_t decoded = 0;
    agent_ring_consume_copy(ring, kCap, [&](gt_gpu_header& h) {
        if (auto op = decode_gpu_op(4242, h, 1000)) decoded += op->name.size() + 1;
        if (auto api = decode_gpu_api(4242, h, -1000)) decoded += api->correlation != 0;
    });
    if (ring->tail != ring->head) std::abort(); // every read ends where the producer is
    return decoded > 1u << 30;
}
