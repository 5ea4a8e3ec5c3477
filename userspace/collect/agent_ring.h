// The ring of gtrace/agent.h, both ends: the agent appends records, gtrace consumes them.
// One producer (the agent serializes its own threads) and one consumer; positions only grow.
// A record never wraps: when it does not fit before the end, a PAD record fills the rest.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gtrace/agent.h"

namespace gtrace {

inline uint8_t* agent_ring_data(gt_agent_ring* r) { return reinterpret_cast<uint8_t*>(r) + GT_AGENT_DATA_OFFSET; }
inline size_t agent_ring_file_size(uint64_t data_bytes) { return GT_AGENT_DATA_OFFSET + data_bytes; }
constexpr uint16_t agent_record_size(size_t payload) { return static_cast<uint16_t>((payload + 7) & ~size_t{7}); }

// Reserves `size` bytes (a multiple of 8) or returns nullptr when the consumer is too far behind.
// The record becomes visible at agent_ring_commit().
inline uint8_t* agent_ring_reserve(gt_agent_ring* r, uint16_t size, uint64_t* position) {
    const uint64_t cap = r->data_bytes;
    uint64_t head = r->head; // only the producer writes it
    uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
    uint64_t offset = head & (cap - 1);
    uint64_t pad = offset + size > cap ? cap - offset : 0;
    if (head + pad + size - tail > cap) return nullptr;
    if (pad) {
        auto* h = reinterpret_cast<gt_gpu_header*>(agent_ring_data(r) + offset);
        h->type = GT_GPU_PAD;
        h->size = 0; // the consumer skips to the end
        head += pad;
    }
    *position = head;
    return agent_ring_data(r) + (head & (cap - 1));
}

inline void agent_ring_commit(gt_agent_ring* r, uint64_t position, uint16_t size) {
    __atomic_store_n(&r->head, position + size, __ATOMIC_RELEASE);
}

// Bytes the producer may still write before it reaches the consumer's tail.
inline uint64_t agent_ring_room(gt_agent_ring* r) {
    uint64_t used = r->head - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
    return used > r->data_bytes ? 0 : r->data_bytes - used;
}

// The agent's records: reserves a zeroed record of `bytes` (rounded up to 8) with its header
// filled, counting a full ring as a drop. The caller fills the rest and commits.
template <typename T>
T* agent_ring_reserve_record(gt_agent_ring* ring, size_t bytes, uint16_t type, uint32_t correlation, uint64_t* position) {
    uint16_t size = agent_record_size(bytes);
    auto* p = agent_ring_reserve(ring, size, position);
    if (!p) {
        ++ring->ring_dropped;
        return nullptr;
    }
    std::memset(p, 0, size);
    auto* h = reinterpret_cast<gt_gpu_header*>(p);
    h->type = type;
    h->size = size;
    h->correlation = correlation;
    return reinterpret_cast<T*>(p);
}

// tail moved on by `bytes`, but never past head: positions near 2^64 (a hostile producer writes
// both) must not wrap tail below head, or the reader would loop for ever.
inline uint64_t advance(uint64_t tail, uint64_t head, uint64_t bytes) { return bytes >= head - tail ? head : tail + bytes; }

struct AgentRingRead {
    size_t records = 0; // handed to visit
    size_t corrupt = 0; // positions or records that made no sense: skipped
};

// gtrace's side: calls visit(gt_gpu_header&) for every committed record, each copied out of the
// shared ring first (the visitor may rewrite its copy) — the producer is another process, possibly hostile, and may rewrite
// a record while it is being read. `cap` is the capacity gtrace measured itself, never the
// header's; positions that make no sense resynchronize the reader at the producer's head.
template <typename Visit>
AgentRingRead agent_ring_consume_copy(gt_agent_ring* r, uint64_t cap, Visit&& visit) {
    alignas(8) static thread_local uint8_t record[65536];
    AgentRingRead got;
    uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
    uint64_t tail = r->tail;
    if (head < tail || head - tail > cap) { // not a ring any more: start over where it is now
        ++got.corrupt;
        __atomic_store_n(&r->tail, head, __ATOMIC_RELEASE);
        return got;
    }
    const uint8_t* data = agent_ring_data(r);
    // Room is handed back as the batch goes, not at its end: a full ring read in one go takes
    // long enough (tens of ms) for the producer to run out of room meanwhile.
    constexpr uint64_t kReleaseEvery = 256 << 10;
    uint64_t released = tail;
    while (tail < head) {
        if (tail - released >= kReleaseEvery) {
            __atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
            released = tail;
        }
        uint64_t offset = tail & (cap - 1);
        // Records start 8-aligned and a header is 8 bytes: a tail elsewhere was moved by the
        // producer, and a header read there could end past the ring. Start over at its head.
        static_assert(sizeof(gt_gpu_header) == 8);
        if (offset % 8) {
            ++got.corrupt;
            tail = head;
            break;
        }
        gt_gpu_header h;
        std::memcpy(&h, data + offset, sizeof h);
        if (h.type == GT_GPU_PAD || h.size < sizeof(gt_gpu_header) || h.size % 8 || offset + h.size > cap) {
            got.corrupt += h.type != GT_GPU_PAD;
            tail = advance(tail, head, cap - offset); // PAD, or garbage: skip to the end rather than read past it
            continue;
        }
        std::memcpy(record, data + offset, h.size);
        auto* copy = reinterpret_cast<gt_gpu_header*>(record);
        copy->size = h.size; // what was checked, whatever the producer wrote since
        visit(*copy);
        tail = advance(tail, head, h.size);
        ++got.records;
    }
    __atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
    return got;
}

} // namespace gtrace
