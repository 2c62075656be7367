#include <atomic>

#include "fuzz/fuzz_target.h"

namespace corescape::fuzz {
namespace {
std::atomic<int64_t> accepted{0};
}  // namespace

void NoteAccepted() { accepted.fetch_add(1, std::memory_order_relaxed); }
int64_t AcceptedCount() { return accepted.load(std::memory_order_relaxed); }

}  // namespace corescape::fuzz
