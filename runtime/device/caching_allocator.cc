#include "runtime/device/caching_allocator.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace corescape::device {

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    owner_ = other.owner_;
    data_ = other.data_;
    size_ = other.size_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (owner_ != nullptr && data_ != nullptr) {
    if (absl::Status s = owner_->Free(data_); !s.ok()) LOG(ERROR) << "device buffer: " << s;
  }
  owner_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

size_t CachingAllocator::SizeClass(size_t bytes) {
  constexpr size_t kMinimum = 512;
  if (bytes <= kMinimum) return kMinimum;
  // bytes in (2^(w−1), 2^w]: round up to a multiple of 2^(w−3), i.e. to
  // 2^(w−1)·{1.25, 1.5, 1.75, 2}.
  const int width = std::bit_width(bytes - 1);
  const size_t step = size_t{1} << (width - 3);
  return (bytes + step - 1) / step * step;
}

CachingAllocator::~CachingAllocator() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = ReleaseCachedLocked(); !s.ok()) LOG(ERROR) << "caching allocator: " << s;
  if (!live_.empty()) {
    LOG(ERROR) << "caching allocator destroyed with " << live_.size() << " buffers alive ("
               << stats_.bytes_in_use << " bytes): they are leaked";
  }
}

absl::StatusOr<DeviceBuffer> CachingAllocator::Allocate(size_t bytes) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  if (bytes > kMaxRequestBytes) {
    return absl::InvalidArgumentError(absl::StrCat(runtime_->device().ToString(), ": request of ",
                                                   bytes, " bytes is above the limit of ",
                                                   kMaxRequestBytes));
  }
  const size_t size_class = SizeClass(bytes);
  absl::MutexLock lock(&mu_);
  void* block = nullptr;
  auto it = free_lists_.find(size_class);
  if (it != free_lists_.end() && !it->second.empty()) {
    block = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= static_cast<int64_t>(size_class);
    ++stats_.cache_hits;
  } else {
    auto fresh = runtime_->AllocateDevice(size_class);
    if (absl::IsResourceExhausted(fresh.status()) && stats_.bytes_cached > 0) {
      // Cached blocks of other classes may be what the device is missing.
      if (absl::Status s = ReleaseCachedLocked(); !s.ok()) return s;
      fresh = runtime_->AllocateDevice(size_class);
    }
    if (!fresh.ok()) {
      return absl::Status(fresh.status().code(),
                          absl::StrCat(fresh.status().message(), " (allocator: ", stats_.bytes_in_use,
                                       " bytes in use, ", stats_.bytes_cached, " cached)"));
    }
    block = *fresh;
    ++stats_.device_allocations;
  }
  live_[block] = size_class;
  stats_.bytes_in_use += static_cast<int64_t>(size_class);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  ++stats_.allocations;
  buffer.owner_ = this;
  buffer.data_ = block;
  buffer.size_ = bytes;
  return buffer;
}

absl::Status CachingAllocator::Free(void* ptr) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        runtime_->device().ToString(), ": freeing a block this allocator does not hold"));
  }
  const size_t size_class = it->second;
  live_.erase(it);
  free_lists_[size_class].push_back(ptr);
  stats_.bytes_in_use -= static_cast<int64_t>(size_class);
  stats_.bytes_cached += static_cast<int64_t>(size_class);
  return absl::OkStatus();
}

absl::Status CachingAllocator::ReleaseCached() {
  absl::MutexLock lock(&mu_);
  return ReleaseCachedLocked();
}

absl::Status CachingAllocator::ReleaseCachedLocked() {
  absl::Status first_error;
  for (auto& [size_class, blocks] : free_lists_) {
    for (void* block : blocks) {
      absl::Status s = runtime_->FreeDevice(block);
      if (s.ok()) {
        ++stats_.device_frees;
      } else if (first_error.ok()) {
        first_error = s;
      }
      stats_.bytes_cached -= static_cast<int64_t>(size_class);
    }
  }
  free_lists_.clear();
  return first_error;
}

AllocatorStats CachingAllocator::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void CachingAllocator::ResetPeak() {
  absl::MutexLock lock(&mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

}  // namespace corescape::device
