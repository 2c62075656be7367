// Rendering of jobs and job events for people (tables, detail blocks) and
// for scripts (JSON). Pure functions of their inputs; the current time is a
// parameter so output is testable.
#ifndef CORESCAPE_CLIENT_CLI_RENDERING_JOB_OUTPUT_H_
#define CORESCAPE_CLIENT_CLI_RENDERING_JOB_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "corescape/v1/job.pb.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {

std::string JobStateName(corescape::v1::JobState state);

// "12,345" (rounded for doubles).
std::string FormatThousands(int64_t value);
// Tokens per second as "12,345", capped at 10^15 (a garbled report prints,
// never overflows); "-" unless positive.
std::string FormatTokensPerSecond(double rate);
// "512 B", "1.5 KiB", "12.3 MiB", "1.0 GiB".
std::string FormatBytes(int64_t bytes);
// A loss as "2.310"; "nan" and "inf" as such.
std::string FormatLoss(double loss);
// Remaining time for people: "45s", "1m20s", "2h05m".
std::string FormatEta(double seconds);
// Whether the progress carries a model FLOPs utilization (a finite one
// above 0: the device's peak was known), and it as "MFU 41.7%".
bool HasMfu(const corescape::v1::JobProgress& progress);
std::string FormatMfu(double mfu);
// "412.5 TFLOP/s per worker, MFU 41.7%", or without a known peak
// "0.0012 TFLOP/s per worker (MFU unknown: no peak for this device)".
std::string RenderComputeRate(const corescape::v1::JobProgress& progress);

// The job's own throughput: tokens over the wall time of its steps
// (JobProgress.tokens_trained / steps_seconds); 0 when the scheduler has
// not counted any (an older one, or no step yet).
double AverageTokensPerSecond(const corescape::v1::JobProgress& progress);

// Every field of the progress, so scripts need not guess defaults, and
// average_tokens_per_second (null when unknown).
nlohmann::json JobProgressToJson(const corescape::v1::JobProgress& progress);
// The job with state names, ISO times next to the unix_ms fields, and the
// spec in the job-file format (proto field names, set fields only).
nlohmann::json JobToJson(const corescape::v1::Job& job);
nlohmann::json JobsToJson(const std::vector<corescape::v1::Job>& jobs);
// {"type": "state"|"progress", "sequence", "time", "unix_ms", "job_id",
//  "state" or "progress", "message"}.
nlohmann::json JobEventToJson(const corescape::v1::JobEvent& event);

// Newest submission first (ties: larger job id first).
void SortJobsNewestFirst(std::vector<corescape::v1::Job>& jobs);

// Job::assigned_nodes holds the workers by rank, then (DISAGGREGATED jobs)
// the attention servers: how many of each are assigned now.
int AssignedWorkers(const corescape::v1::Job& job);
int AssignedAttentionServers(const corescape::v1::Job& job);

// JOB NAME STATE DEVICE STEP/TOTAL LOSS VAL-LOSS TOKENS/S WORKERS SERVERS AGE
// (WORKERS and SERVERS: assigned/wanted; SERVERS "-" unless DISAGGREGATED),
// then "JOB: reason" for every PENDING job with a reason.
std::string RenderJobsTable(const std::vector<corescape::v1::Job>& jobs,
                            int64_t now_unix_ms);

// Key/value lines (spec summary, state and reason, generation, progress,
// times) followed by the assigned nodes by rank.
std::string RenderJobDetails(const corescape::v1::Job& job,
                             int64_t now_unix_ms);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_RENDERING_JOB_OUTPUT_H_
