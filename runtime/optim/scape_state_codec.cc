#include "runtime/optim/scape_state_codec.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/optim/mask_codec.h"
#include "runtime/optim/optimizer_state.h"

namespace corescape::optim {
namespace {

void AddMask(StateWriter& w, const std::string& prefix, const GlobalMask& mask) {
  w.AddInt64(prefix + ".step", mask.step);
  w.AddInt64(prefix + ".mask_epoch", static_cast<int64_t>(mask.mask_epoch));
  std::vector<int64_t> counts, flat;
  for (const std::vector<int64_t>& part : mask.parts) {
    counts.push_back(static_cast<int64_t>(part.size()));
    flat.insert(flat.end(), part.begin(), part.end());
  }
  w.AddInt64s(prefix + ".part_sizes", counts);
  w.AddInt64s(prefix + ".parts", flat);
  w.AddInt64s(prefix + ".indices", mask.indices);
}

// A mask of an n-entry buffer, checked like one received.
absl::StatusOr<GlobalMask> ReadMask(const StateReader& r, const std::string& prefix, int64_t n) {
  GlobalMask mask;
  auto step = r.Int64(prefix + ".step");
  auto mask_epoch = r.Int64(prefix + ".mask_epoch");
  auto counts = r.Int64s(prefix + ".part_sizes");
  auto flat = r.Int64s(prefix + ".parts");
  auto indices = r.Int64s(prefix + ".indices");
  for (const absl::Status& s : {step.status(), mask_epoch.status(), counts.status(),
                                flat.status(), indices.status()}) {
    if (!s.ok()) return s;
  }
  mask.step = *step;
  mask.mask_epoch = static_cast<uint64_t>(*mask_epoch);
  int64_t offset = 0;
  for (int64_t count : *counts) {
    if (count < 0 || count > static_cast<int64_t>(flat->size()) - offset) {
      return absl::DataLossError("optimizer state: mask parts do not add up");
    }
    mask.parts.emplace_back(flat->begin() + offset, flat->begin() + offset + count);
    offset += count;
    if (!CheckMaskPartition({0, n, mask.parts.back()}).ok()) {
      return absl::DataLossError(absl::StrCat("optimizer state: a part of mask '", prefix,
                                              "' is not sorted inside the buffer"));
    }
  }
  mask.indices = std::move(*indices);
  if (!CheckMaskPartition({0, n, mask.indices}).ok()) {
    return absl::DataLossError(absl::StrCat("optimizer state: mask '", prefix,
                                            "' is not sorted inside the buffer"));
  }
  return mask;
}

}  // namespace

std::string EncodeScapeState(const ScapeStateView& s) {
  StateWriter w;
  w.AddString("kind", s.kind);
  w.AddString("config", s.config);
  w.AddInt64("rank", s.rank);
  w.AddInt64("world_size", s.world_size);
  w.AddInt64s("partition", s.partition);
  w.AddInt64("step", s.step);
  w.AddFloats("m", s.m);
  w.AddFloats("vbar", s.vbar);
  w.AddFloats("residual", s.residual);
  w.AddInt64s("last_sync", s.last_sync);
  AddMask(w, "current", s.current);
  w.AddInt64("has_pending", s.pending.has_value() ? 1 : 0);
  if (s.pending) AddMask(w, "pending", *s.pending);
  return w.Finish();
}

absl::StatusOr<ScapeState> DecodeScapeState(absl::string_view blob, absl::string_view kind,
                                            absl::string_view config, int64_t n) {
  auto r = StateReader::Parse(blob);
  if (!r.ok()) return r.status();
  auto stored_kind = r->String("kind");
  if (!stored_kind.ok()) return stored_kind.status();
  if (*stored_kind != kind) {
    return absl::FailedPreconditionError(
        absl::StrCat("optimizer state is for '", *stored_kind, "', not '", kind, "'"));
  }
  auto stored_config = r->String("config");
  auto rank = r->Int64("rank");
  auto world = r->Int64("world_size");
  for (const absl::Status& s : {stored_config.status(), rank.status(), world.status()}) {
    if (!s.ok()) return s;
  }
  if (*stored_config != config) {
    return absl::FailedPreconditionError(absl::StrCat(
        "scape: state from another configuration (", *stored_config, ") than this (", config, ")"));
  }
  auto step = r->Count("step");
  auto m = r->FloatsOfSize("m", n);
  auto vbar = r->FloatsOfSize("vbar", n);
  auto residual = r->FloatsOfSize("residual", n);
  auto last_sync = r->Int64s("last_sync");
  auto current = ReadMask(*r, "current", n);
  auto has_pending = r->Int64("has_pending");
  auto partition = r->Int64s("partition");
  for (const absl::Status& s : {step.status(), m.status(), vbar.status(), residual.status(),
                                last_sync.status(), current.status(), has_pending.status(),
                                partition.status()}) {
    if (!s.ok()) return s;
  }
  if (static_cast<int64_t>(last_sync->size()) != n) {
    return absl::FailedPreconditionError("scape: state of another buffer size");
  }
  // Every coordinate last synchronized before this step (−1: never), so
  // windows are at least 1.
  for (int64_t since : *last_sync) {
    if (since < -1 || since >= *step) {
      return absl::DataLossError(absl::StrCat(
          "optimizer state: a coordinate last synchronized at step ", since, ", state of step ",
          *step));
    }
  }
  ScapeState state;
  if (*has_pending) {
    auto mask = ReadMask(*r, "pending", n);
    if (!mask.ok()) return mask.status();
    state.pending = std::move(*mask);
  }
  state.rank = *rank;
  state.world_size = *world;
  state.partition = std::move(*partition);
  state.step = *step;
  state.m = std::move(*m);
  state.vbar = std::move(*vbar);
  state.residual = std::move(*residual);
  state.last_sync = std::move(*last_sync);
  state.current = std::move(*current);
  return state;
}

}  // namespace corescape::optim
