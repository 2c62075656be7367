#ifndef CORESCAPE_RUNTIME_BASE_STREAM_SLOTS_H_
#define CORESCAPE_RUNTIME_BASE_STREAM_SLOTS_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace corescape {

// A cap on concurrent long-lived streams of one kind (each holds a server
// thread for as long as it is open). A stream takes a slot when it opens and
// gives it back when its handler returns; past the cap it is refused with
// RESOURCE_EXHAUSTED naming the cap and the flag that sets it.
class StreamSlots {
 public:
  // Returns its slot when destroyed. Move-only.
  class Slot {
   public:
    Slot(Slot&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    Slot& operator=(Slot&&) = delete;
    ~Slot();

   private:
    friend class StreamSlots;
    explicit Slot(StreamSlots* owner) : owner_(owner) {}
    StreamSlots* owner_;
  };

  // `what` names the streams ("Session streams"), `flag` the flag setting
  // `capacity` (> 0).
  StreamSlots(std::string what, std::string flag, int capacity);

  absl::StatusOr<Slot> Acquire();
  // Acquire() on `slots`; with none (null), an unlimited slot.
  static absl::StatusOr<Slot> AcquireFrom(StreamSlots* slots);
  int in_use() const;
  int capacity() const { return capacity_; }

 private:
  void Release();

  const std::string what_;
  const std::string flag_;
  const int capacity_;
  mutable absl::Mutex mu_;
  int in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_STREAM_SLOTS_H_
