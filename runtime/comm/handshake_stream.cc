#include "runtime/comm/handshake_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/comm/wire_codec.h"

namespace corescape::comm {
namespace {

constexpr absl::string_view kReadyMagic = "CSRD";

}  // namespace

absl::StatusOr<std::string> EncodeReadyFrame(const ReadyFrame& frame) {
  if (frame.bind_token.size() != kBindTokenBytes) {
    return absl::InvalidArgumentError("ready frame: the bind token must be 16 bytes");
  }
  if (frame.worker_address.empty() || frame.worker_address.size() > kMaxWorkerAddressBytes) {
    return absl::InvalidArgumentError(absl::StrCat("ready frame: worker address of ",
                                                   frame.worker_address.size(),
                                                   " bytes (1..", kMaxWorkerAddressBytes, ")"));
  }
  std::string out(kReadyHeaderBytes, '\0');
  out.replace(0, kReadyMagic.size(), kReadyMagic.data(), kReadyMagic.size());
  wire::PutU32(out.data() + 4, static_cast<uint32_t>(frame.worker_address.size()));
  out.replace(8, kBindTokenBytes, frame.bind_token);
  out += frame.worker_address;
  return out;
}

void HandshakeInbox::Expect(Item what) {
  expect_ = what;
  buffer_.clear();
  ready_address_bytes_ = 0;
}

size_t HandshakeInbox::Needed() const {
  switch (expect_) {
    case Item::kNothing:
      return 0;
    case Item::kHello:
      return kHelloBytes - buffer_.size();
    case Item::kBoundByte:
      return 1 - buffer_.size();
    case Item::kReadyFrame:
      if (buffer_.size() < kReadyHeaderBytes) return kReadyHeaderBytes - buffer_.size();
      return kReadyHeaderBytes + ready_address_bytes_ - buffer_.size();
  }
  return 0;
}

absl::Status HandshakeInbox::Append(absl::string_view bytes) {
  if (bytes.empty()) return absl::OkStatus();
  if (expect_ == Item::kNothing) {
    return absl::InvalidArgumentError(
        absl::StrCat("sent ", bytes.size(), " byte(s) where the handshake expects none"));
  }
  if (bytes.size() > Needed()) {
    return absl::InvalidArgumentError(absl::StrCat("sent ", bytes.size(),
                                                   " byte(s) where the handshake expects ",
                                                   Needed()));
  }
  const bool had_header = buffer_.size() >= kReadyHeaderBytes;
  buffer_.append(bytes.data(), bytes.size());
  if (expect_ == Item::kReadyFrame && !had_header && buffer_.size() >= kReadyHeaderBytes) {
    if (absl::string_view(buffer_).substr(0, kReadyMagic.size()) != kReadyMagic) {
      return absl::InvalidArgumentError("ready frame: bad magic");
    }
    const uint32_t length = wire::GetU32(buffer_.data() + 4);
    if (length == 0 || length > kMaxWorkerAddressBytes) {
      return absl::InvalidArgumentError(absl::StrCat("ready frame: worker address of ", length,
                                                     " bytes (1..", kMaxWorkerAddressBytes,
                                                     ")"));
    }
    ready_address_bytes_ = length;
  }
  return absl::OkStatus();
}

absl::StatusOr<HelloMessage> HandshakeInbox::TakeHello() {
  if (expect_ != Item::kHello || !complete()) {
    return absl::FailedPreconditionError("no complete handshake message");
  }
  absl::StatusOr<HelloMessage> hello = HelloMessage::Parse(buffer_);
  Expect(Item::kNothing);
  return hello;
}

absl::StatusOr<ReadyFrame> HandshakeInbox::TakeReadyFrame() {
  if (expect_ != Item::kReadyFrame || !complete()) {
    return absl::FailedPreconditionError("no complete ready frame");
  }
  ReadyFrame frame;
  frame.bind_token = buffer_.substr(8, kBindTokenBytes);
  frame.worker_address = buffer_.substr(kReadyHeaderBytes);
  Expect(Item::kNothing);
  return frame;
}

absl::Status HandshakeInbox::TakeBoundByte() {
  if (expect_ != Item::kBoundByte || !complete()) {
    return absl::FailedPreconditionError("no bound byte");
  }
  const char byte = buffer_[0];
  Expect(Item::kNothing);
  if (byte != kBoundByte) return absl::InvalidArgumentError("bad bound byte");
  return absl::OkStatus();
}

}  // namespace corescape::comm
