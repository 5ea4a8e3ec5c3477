// The job's own CUPTI client — its profiler: Kineto inside libtorch (torch.profiler, dynolog's
// on-demand traces), or a tool's library — beside gtrace's session. Classic CUPTI keeps one set
// of activity buffer callbacks and one set of enabled kinds per process (cupti_activity.h: no
// subscriber handle; per-subscriber state only with CUDA 13.3's _v2 API, see
// tests/gpusim/README.md): whoever registers last gets every record, and a kind one client
// disables is off for the other. So the job's calls to that API are redirected here (their GOT
// slots, got_patch.h), and while gtrace records, the two share CUPTI instead of taking it from
// each other:
//   - gtrace's callbacks stay registered; while the job's window is open (some kind it enabled
//     still on) CUPTI's buffers are the job's own, asked of its callback, and each goes back to it
//     once gtrace read its records: the job's output is what it would have been;
//   - a kind the job disables that gtrace still needs stays on (the job gets records it did not
//     ask for; Kineto keeps those of its window, and discards the rest); its finalize waits until
//     gtrace stops;
//   - at gtrace's stop the job's callbacks are registered again and its kinds left on;
//   - CUPTI's callback API takes one subscriber: when the job's profiler subscribes, gtrace's
//     session gives its subscription up (yield_callbacks) and lets the job's call through.
// A window already open when gtrace starts is found by its buffers reaching gtrace's callback
// when gtrace flushes at once; they go back to the job through its callback — known from its
// registration, or, in a process gtrace meets for the first time, Kineto's exported trampolines.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cupti.h>

namespace gtrace::agent {

// What the session lends: how to switch its API-record filter, and where a window is reported.
struct SessionSide {
    // true: the job's window wants every API record (its RUNTIME/DRIVER on); false: back to gtrace's own
    void (*all_api_records)(bool) = nullptr;
    // A window of the job's, closed (to_ns) or still open at the stop (to_ns 0); CLOCK_MONOTONIC.
    void (*report_window)(uint64_t from_ns, uint64_t to_ns, bool found_open, bool found_by_kinds, uint64_t buffers_lost) = nullptr;
    // The job's profiler subscribes to the callback API, which the session holds: the session
    // lets it go (true) and joins through API records, rather than leave the job's profiler
    // without GPU records for good (Kineto before 2026-08 runs CPU-only when its subscribe fails).
    bool (*yield_callbacks)() = nullptr;
};

// Redirects the job's imports of CUPTI's activity API (again: objects loaded since) — those
// bound to the session's CUPTI (`cupti`, the handle it loaded): a job on another copy (a --cupti
// path) shares nothing with the session, and that copy is never called (the wheels' libcupti
// recurses without end where there is no driver). Returns the objects whose imports are
// redirected. Safe to call any time; the redirected calls pass straight through while no
// session records.
std::vector<std::string> watch_job_cupti(void* cupti, const std::string& cupti_path);

// Session start, before gtrace's callbacks are registered, and right after (probe_open_window
// flushes: a window open now shows by its buffers). session_kind_on: a kind gtrace switched on.
void share_cupti_begin(const SessionSide& side);
void session_kind_on(CUpti_ActivityKind kind);
void probe_open_window();
// Session stop, after its callbacks are off and before it disables its kinds: the kinds gtrace
// may disable (those the job has not on), and whether finalizing CUPTI leaves the job alone.
struct ShareEnd {
    std::vector<CUpti_ActivityKind> disable;
    bool may_finalize = true;
};
// foreign_subscriber: the session found CUPTI's callback API held when it started.
ShareEnd share_cupti_end(bool foreign_subscriber);
// Called after the session's last flush: the job's callbacks registered again, when it had some,
// and the redirected calls pass straight through from then on.
void restore_job_callbacks();
// Whether the job's open window records every API (the session's ids stay on for it).
bool job_wants_all_api();
// From the agent's thread, every few hundred ms: a closed window whose last buffers the job
// never flushed back is settled (new buffers gtrace's again).
void settle_job_window();
// The process is exiting: the job's profiler may be destroyed already; nothing goes back to it.
void share_cupti_exiting();

// The session's buffer callbacks: a buffer from the job while its window is open (true: served).
bool job_serves_request(uint8_t** buffer, size_t* size, size_t* max_records);
// Records of a kind only the job's profiler switches on (Kineto: EXTERNAL_CORRELATION,
// OVERHEAD) reached one of gtrace's own buffers: the job's window is open.
void foreign_records_seen();
// Whether a buffer came from the job's callback through gtrace's (its records were made while
// gtrace recorded; a buffer neither gtrace's nor that predates the session: not read).
bool handed_by_job(uint8_t* buffer);
// A completed buffer that is not gtrace's own, once read: back to the job, or kept from it and
// counted when the job's callback is not known. Never under the session's ring lock.
void give_back_job_buffer(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid);

} // namespace gtrace::agent
