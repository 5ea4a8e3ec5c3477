// The CUPTI buffer protocol: buffers come from bufferRequested, are filled with 8-byte aligned
// records and go back through bufferCompleted, from the worker thread or from a flush.
#include <cstdlib>
#include <cstring>

#include "state.h"

namespace gtsim::cupti {
namespace {

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}

size_t align8(size_t n) { return (n + ACTIVITY_RECORD_ALIGNMENT - 1) & ~size_t{ACTIVITY_RECORD_ALIGNMENT - 1}; }

} // namespace

namespace {
std::mutex g_instances_mu;
std::vector<Buffers*>& instances() {
    static auto* v = new std::vector<Buffers*>;
    return *v;
}
} // namespace

Buffers& Buffers::get() {
    // Leaked: the detached worker and atexit handlers may use it during exit.
    static Buffers* b = [] {
        auto* first = new Buffers();
        std::lock_guard lk(g_instances_mu);
        instances().push_back(first);
        return first;
    }();
    return *b;
}

Buffers* Buffers::create() {
    auto* b = new Buffers();
    std::lock_guard lk(g_instances_mu);
    instances().push_back(b);
    return b;
}

void Buffers::Callbacks::request(uint8_t** data, size_t* bytes, size_t* max_records) const {
    if (req) return req(data, bytes, max_records);
    CUpti_BufferCallbackRequestInfo info{sizeof info};
    req2(data, bytes, max_records, &info);
}

void Buffers::Callbacks::complete(uint8_t* data, size_t size, size_t valid) const {
    // Deprecated since CUDA 6: context is always NULL and streamId 0 (global buffers).
    if (done) return done(nullptr, 0, data, size, valid);
    CUpti_BufferCallbackCompleteInfo info{};
    info.structSize = sizeof info;
    info.threadId = gettid_u32();
    done2(data, size, valid, &info);
}

void Buffers::set_callbacks(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc done) {
    std::lock_guard lk(mu_);
    cb_ = Callbacks{req, done, nullptr, nullptr};
    start_worker_locked();
}

void Buffers::set_callbacks_v2(CUpti_BuffersCallbackRequestFunc_v2 req, CUpti_BuffersCallbackCompleteFunc_v2 done) {
    std::lock_guard lk(mu_);
    cb_ = Callbacks{nullptr, nullptr, req, done};
    start_worker_locked();
}

void Buffers::start_worker_locked() {
    if (worker_started_) return;
    worker_started_ = true;
    std::thread([this] { worker(); }).detach();
    // Stop deliveries before static destructors run; the client flushes at exit if it wants.
    static std::once_flag once;
    std::call_once(once, [] {
        atexit([] {
            std::vector<Buffers*> all;
            {
                std::lock_guard lk(g_instances_mu);
                all = instances();
            }
            for (Buffers* b : all) b->stop_worker();
        });
    });
}

bool Buffers::has_callbacks() {
    std::lock_guard lk(mu_);
    return cb_.set();
}

void Buffers::append(const void* record, size_t size, uint64_t complete_at) {
    std::unique_lock lk(mu_);
    for (;;) {
        if (!cb_.set()) { // enabled without callbacks: CUPTI drops and counts
            ++dropped_;
            return;
        }
        if (cur_) {
            Buf& b = *cur_;
            if (b.used + size <= b.size && (b.max_records == 0 || b.records < b.max_records)) {
                memcpy(b.data + b.used, record, size);
                b.used = align8(b.used + size);
                b.records++;
                b.complete_at = std::max(b.complete_at, complete_at);
                return;
            }
            bool unusable = b.used == 0; // too small for even this record
            full_.push_back(b);
            cur_.reset();
            wake_.notify_one();
            if (unusable) {
                ++dropped_;
                return;
            }
        }
        if (!spare_.empty()) {
            cur_ = spare_.back();
            spare_.pop_back();
            continue;
        }
        // Ask the client for a buffer without holding the lock: it is client code.
        Callbacks cb = cb_;
        lk.unlock();
        uint8_t* data = nullptr;
        size_t bytes = 0, max_records = 0;
        cb.request(&data, &bytes, &max_records);
        lk.lock();
        if (!data) {
            ++dropped_;
            return;
        }
        Buf nb{data, bytes, 0, max_records, 0, 0};
        if (reinterpret_cast<uintptr_t>(data) % ACTIVITY_RECORD_ALIGNMENT != 0 || !(cb_ == cb)) {
            // Misaligned, or CUPTI was finalized meanwhile: give it straight back, empty.
            ++dropped_;
            lk.unlock();
            cb.complete(data, bytes, 0);
            return;
        }
        if (cur_)
            spare_.push_back(nb); // another thread installed one meanwhile
        else
            cur_ = nb;
    }
}

std::vector<Buffers::Buf> Buffers::take_locked(bool forced, bool include_empty_current) {
    uint64_t now = now_ns();
    std::vector<Buf> out, keep;
    for (Buf& b : full_) (forced || b.complete_at <= now ? out : keep).push_back(b);
    full_.swap(keep);
    if (cur_ && (include_empty_current || (cur_->used > 0 && (forced || cur_->complete_at <= now)))) {
        out.push_back(*cur_);
        cur_.reset();
    }
    return out;
}

void Buffers::deliver(const std::vector<Buf>& bufs, const Callbacks& to) {
    for (const Buf& b : bufs) to.complete(b.data, b.size, b.used);
}

void Buffers::flush(bool forced) {
    std::unique_lock lk(mu_);
    Callbacks cb = cb_;
    if (!cb.set()) return;
    std::vector<Buf> bufs = take_locked(forced, false);
    lk.unlock();
    deliver(bufs, cb);
    lk.lock();
    // Buffers the worker took before us must be delivered before we return, too.
    if (std::this_thread::get_id() != worker_id_) idle_.wait(lk, [this] { return inflight_ == 0; });
}

void Buffers::worker() {
    std::unique_lock lk(mu_);
    worker_id_ = std::this_thread::get_id();
    while (!stopping_) {
        wake_.wait_for(lk, std::chrono::milliseconds(period_ms_));
        if (stopping_ || !cb_.set()) continue;
        // Like the brief's CUPTI: non-empty buffers go back every period once their work ended.
        std::vector<Buf> bufs = take_locked(false, false);
        if (bufs.empty()) continue;
        Callbacks cb = cb_;
        ++inflight_;
        lk.unlock();
        deliver(bufs, cb);
        lk.lock();
        --inflight_;
        idle_.notify_all();
    }
}

void Buffers::stop_worker() {
    std::unique_lock lk(mu_);
    stopping_ = true;
    wake_.notify_all();
    if (std::this_thread::get_id() != worker_id_) idle_.wait(lk, [this] { return inflight_ == 0; });
}

size_t Buffers::take_dropped() {
    std::lock_guard lk(mu_);
    size_t d = dropped_;
    dropped_ = 0;
    return d;
}

void Buffers::set_period_ms(uint32_t ms) {
    std::lock_guard lk(mu_);
    period_ms_ = ms ? ms : 200;
    wake_.notify_all();
}

void Buffers::detach() {
    flush(true);
    std::unique_lock lk(mu_);
    Callbacks cb = cb_;
    std::vector<Buf> bufs = take_locked(true, true);
    bufs.insert(bufs.end(), spare_.begin(), spare_.end());
    spare_.clear();
    cb_ = {};
    lk.unlock();
    if (cb.set()) deliver(bufs, cb);
}

} // namespace gtsim::cupti
