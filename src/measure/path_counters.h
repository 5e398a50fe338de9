// The per-path figures of a flow, one line each: the PathSample field a stack's probe fills,
// its column in the per-path vector, how a run's summary takes it (a mean over the samples,
// a cumulative counter counted from the end of the warm-up, or the vector alone), its name in
// the scalar file and its key in the --json document (and where the document has it: a path's
// object, the whole connection's, or both), and its unit. The summary (PathSummary), the
// scalar rows, the vector's header and rows, the JSON document and, through a unit test, its
// schema are all driven by this table; adding a figure is a PathSample field, the probe that
// fills it and a line here (src/README.md, "Adding a counter").
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "transport/path_sample.h"

namespace npm::measure {

enum class PathSummaryKind {
  kVectorOnly,  // in the per-path vector only
  kMean,        // "Mean X": the mean over the samples that had a value (restarted at the warm-up's end)
  kCounter,     // a cumulative count: its last value less its value at the warm-up's end
};

// Where the JSON document has a figure: in each path's object, in the whole connection's.
enum PathScope : unsigned { kInPath = 1, kInConnection = 2, kInBoth = 3 };

struct PathCounter {
  double transport::PathSample::*field;
  std::string_view column;  // per-path vector column
  int decimals;             // printed in the vector
  PathSummaryKind kind;
  std::string_view scalar;  // scalar-file name (empty: vector only)
  std::string_view json;    // JSON key (empty: vector only)
  unsigned scope;           // PathScope bits (0: vector only)
  std::string_view unit;
};

// In the vector's column order; the scalar file and the JSON give the means first, then the
// counters, each in this order.
inline constexpr PathCounter kPathCounters[] = {
    // clang-format off
    {&transport::PathSample::cwnd, "Cwnd", 0, PathSummaryKind::kMean, "Mean Cwnd", "mean_cwnd", kInPath, "bytes"},
    {&transport::PathSample::ssthresh, "Ssthresh", 0, PathSummaryKind::kVectorOnly, {}, {}, 0, "bytes"},
    {&transport::PathSample::srttMs, "RTT", 3, PathSummaryKind::kMean, "Mean RTT", "mean_rtt_ms", kInPath, "ms"},
    {&transport::PathSample::rttVarMs, "RTTVar", 3, PathSummaryKind::kVectorOnly, {}, {}, 0, "ms"},
    {&transport::PathSample::rtoMs, "RTO", 3, PathSummaryKind::kVectorOnly, {}, {}, 0, "ms"},
    {&transport::PathSample::mtu, "MTU", 0, PathSummaryKind::kVectorOnly, {}, {}, 0, "bytes"},
    {&transport::PathSample::bytesSent, "BytesSent", 0, PathSummaryKind::kCounter, "Bytes Sent", "bytes_sent", kInBoth, "bytes"},
    {&transport::PathSample::bytesAcked, "BytesAcked", 0, PathSummaryKind::kCounter, "Bytes Acked", "bytes_acked", kInBoth, "bytes"},
    {&transport::PathSample::bytesReceived, "BytesReceived", 0, PathSummaryKind::kCounter, "Bytes Received", "bytes_received", kInBoth, "bytes"},
    {&transport::PathSample::retransmissions, "Retransmissions", 0, PathSummaryKind::kCounter, "Retransmissions", "retransmissions", kInBoth, "segments, DATA chunks"},
    {&transport::PathSample::lost, "Lost", 0, PathSummaryKind::kVectorOnly, {}, {}, 0, "packets"},
    {&transport::PathSample::unacked, "Unacked", 0, PathSummaryKind::kMean, "Mean Unacked", "mean_unacked", kInBoth, "segments, DATA chunks, bytes"},
    {&transport::PathSample::deliveryRate, "DeliveryRate", 0, PathSummaryKind::kVectorOnly, {}, {}, 0, "bit/s"},
    {&transport::PathSample::pacingRate, "PacingRate", 0, PathSummaryKind::kVectorOnly, {}, {}, 0, "bit/s"},
    {&transport::PathSample::rwnd, "Rwnd", 0, PathSummaryKind::kMean, "Mean Rwnd", "mean_rwnd", kInConnection, "bytes"},
    {&transport::PathSample::pending, "Pending", 0, PathSummaryKind::kMean, "Mean Pending", "mean_pending", kInConnection, "DATA chunks"},
    {&transport::PathSample::fastRetransmissions, "FastRetrans", 0, PathSummaryKind::kCounter, "Fast Retransmissions", "fast_retransmissions", kInPath, "DATA chunks"},
    {&transport::PathSample::timerRetransmissions, "TimerRetrans", 0, PathSummaryKind::kCounter, "Timer Retransmissions", "timer_retransmissions", kInPath, "DATA chunks"},
    {&transport::PathSample::rescheduled, "Rescheduled", 0, PathSummaryKind::kCounter, "Rescheduled Chunks", "rescheduled_chunks", kInPath, "DATA chunks"},
    {&transport::PathSample::dropReported, "DropReported", 0, PathSummaryKind::kCounter, "Drop-Reported Chunks", "drop_reported_chunks", kInPath, "DATA chunks"},
    {&transport::PathSample::smartFrIgnored, "SmartFrIgnored", 0, PathSummaryKind::kCounter, "Smart FR Ignored Acks", "smartfr_ignored_acks", kInPath, "SACKs"},
    // clang-format on
};
inline constexpr std::size_t kPathCounterCount = std::size(kPathCounters);

// The per-path vector's columns before the table's: the time, the path and what it is.
inline constexpr std::array<std::string_view, 6> kPathIdentityColumns = {"AbsTime", "RelTime", "Path",
                                                                         "Local",   "Remote",  "State"};

// The counters of one kind, in table order: forEachPathCounter(kind, [](std::size_t i, const PathCounter& c) {...}).
template <typename F>
void forEachPathCounter(PathSummaryKind kind, F&& f) {
  for (std::size_t i = 0; i < kPathCounterCount; ++i) {
    if (kPathCounters[i].kind == kind) f(i, kPathCounters[i]);
  }
}

}  // namespace npm::measure
