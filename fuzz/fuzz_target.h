#ifndef CORESCAPE_FUZZ_FUZZ_TARGET_H_
#define CORESCAPE_FUZZ_FUZZ_TARGET_H_

// What every fuzz target (a cc_fuzz_target in //bazel:fuzz.bzl) defines:
//  - ParseFuzzInput(input): parse one input and never crash, whatever the
//    bytes; true when the parser accepted it;
//  - FuzzSeeds(): well-formed inputs made with the format's own encoder, the
//    seed corpus (so it follows the format when the format changes).
// libFuzzer's entry point, LLVMFuzzerTestOneInput (fuzz_entry.cc), calls
// ParseFuzzInput and counts the accepted inputs, so the seed run can prove
// the seeds reach past the first check.
//
// Under --config=fuzz the target links libFuzzer's main; otherwise it links
// seed_driver.cc, which runs the seeds and deterministic mutations of them
// (every truncation, byte flips) — the CI run without clang.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace corescape::fuzz {

bool ParseFuzzInput(absl::string_view input);
std::vector<std::string> FuzzSeeds();

void NoteAccepted();
int64_t AcceptedCount();

}  // namespace corescape::fuzz

#endif  // CORESCAPE_FUZZ_FUZZ_TARGET_H_
