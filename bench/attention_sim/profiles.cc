#include "bench/attention_sim/profiles.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace corescape::bench {
namespace {

absl::StatusOr<std::vector<std::vector<std::string>>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<std::vector<std::string>> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    rows.push_back(absl::StrSplit(line, ','));
  }
  return rows;
}

double Interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  if (x <= xs.front()) return ys.front();
  if (x >= xs.back()) return ys.back();
  const size_t i = std::upper_bound(xs.begin(), xs.end(), x) - xs.begin();
  const double f = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
  return ys[i - 1] + f * (ys[i] - ys[i - 1]);
}

double Pairs(double length) { return length * (length + 1) / 2; }

}  // namespace

absl::StatusOr<AttentionTimeModel> AttentionTimeModel::FromCsv(const std::string& path, int tp) {
  absl::StatusOr<std::vector<std::vector<std::string>>> rows = ReadCsv(path);
  if (!rows.ok()) return rows.status();
  std::map<int64_t, double> ms;  // L -> duration_per_doc
  for (const auto& row : *rows) {
    if (row.size() != 4) return absl::InvalidArgumentError(absl::StrCat(path, ": expected L,cp,tp,ms"));
    if (std::stoi(row[1]) != 1 || std::stoi(row[2]) != tp) continue;
    ms[std::stoll(row[0])] = std::stod(row[3]);
  }
  if (ms.size() < 3) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": too few rows for tp=", tp));
  }
  AttentionTimeModel model;
  model.launch_ms_ = ms.begin()->second;
  for (const auto& [length, t] : ms) {
    if (length < 512) continue;
    model.log_length_.push_back(std::log(static_cast<double>(length)));
    model.log_per_pair_.push_back(std::log(std::max(t - model.launch_ms_, 1e-9) / Pairs(length)));
  }
  return model;
}

double AttentionTimeModel::PerPairMs(double length) const {
  return std::exp(Interpolate(log_length_, log_per_pair_, std::log(std::max(length, 1.0))));
}

double AttentionTimeModel::DocumentMs(int64_t length) const {
  return launch_ms_ + Pairs(static_cast<double>(length)) * PerPairMs(static_cast<double>(length));
}

absl::StatusOr<NcclBandwidth> NcclBandwidth::FromCsv(const std::string& path, const std::string& op,
                                                     int gpus) {
  absl::StatusOr<std::vector<std::vector<std::string>>> rows = ReadCsv(path);
  if (!rows.ok()) return rows.status();
  NcclBandwidth bw;
  for (const auto& row : *rows) {
    if (row.size() != 11) return absl::InvalidArgumentError(absl::StrCat(path, ": expected 11 columns"));
    if (row[0] != op || std::stoi(row[1]) != gpus) continue;
    bw.log_size_.push_back(std::log(std::stod(row[3])));
    bw.gbps_.push_back(std::stod(row[7]));  // busbw_out_gbs
  }
  if (bw.log_size_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no rows for ", op, " on ", gpus, " GPUs"));
  }
  return bw;
}

double NcclBandwidth::BusGBps(double bytes) const {
  return Interpolate(log_size_, gbps_, std::log(std::max(bytes, 1.0)));
}

}  // namespace corescape::bench
