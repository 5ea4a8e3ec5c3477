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
inline uint16_t agent_record_size(size_t payload) { return static_cast<uint16_t>((payload + 7) & ~size_t{7}); }

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

// Calls visit(const gt_gpu_header&) for every committed record; returns how many it read.
template <typename Visit>
size_t agent_ring_consume(gt_agent_ring* r, Visit&& visit) {
    const uint64_t cap = r->data_bytes;
    uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
    uint64_t tail = r->tail;
    size_t n = 0;
    while (tail < head) {
        uint64_t offset = tail & (cap - 1);
        const auto* h = reinterpret_cast<const gt_gpu_header*>(agent_ring_data(r) + offset);
        if (h->type == GT_GPU_PAD || h->size < sizeof(gt_gpu_header) || offset + h->size > cap) {
            tail += cap - offset; // PAD, or garbage: skip to the end rather than read past it
            continue;
        }
        visit(*h);
        tail += h->size;
        ++n;
    }
    __atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
    return n;
}

} // namespace gtrace
