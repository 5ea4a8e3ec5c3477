// What gtrace's JSON traces are made of, for their writers (output/chrome_trace.h,
// output/kineto_writer.h) and their readers (analyze/trace_reader.h, analyze/partial_trace.h):
// the bytes each file starts and ends with, and the track ids beside each thread's.
#pragma once
#include <cstdint>
#include <string_view>

namespace gtrace {

// The bytes every gtrace JSON trace starts with; then one event a line, separated by ",\n".
constexpr std::string_view kChromeTraceHeader = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
// And ends with this, otherData's object on one line, then "}\n".
constexpr std::string_view kChromeTraceClosing = "\n],\n\"otherData\":";

// Sample frames go on a track of their own beside each thread's CUDA call slices.
constexpr uint32_t kSampleTrackTidOffset = 1u << 30;
constexpr uint32_t kOffCpuTrackTidOffset = 1u << 29; // "off CPU (thread N)": a main thread's time asleep
// gtrace's JSON traces hold event texts (names, sources, frames) in ASCII: a byte past 0x7f is
// written as '?' (output/json_event_file.cpp), and that is what a reader gets back.
inline char json_trace_char(unsigned char c) { return c >= 0x80 ? '?' : static_cast<char>(c); }

// GPU track ids, far above any thread id (pid_max is at most 2^22).
constexpr uint32_t kGpuTrackBase = 1000000000u;
inline uint32_t gpu_track_tid(uint32_t device, uint32_t stream) { return kGpuTrackBase + device * 100000u + stream % 100000u; }

// Every Kineto file gtrace writes starts with this, then its distributedInfo; its events follow
// kKinetoEventsStart, one a line, and end with "\n],\n" and the rest of the object.
constexpr std::string_view kKinetoHeaderStart = "{\n\"schemaVersion\": 1,\n";
constexpr std::string_view kKinetoEventsStart = "\"traceEvents\": [\n";

} // namespace gtrace
