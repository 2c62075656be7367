#include "scheduler/request_validation.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/host_port.h"
#include "runtime/base/node_name.h"

namespace corescape::scheduler {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status ValidateFreeText(absl::string_view field, absl::string_view text,
                              size_t max_length) {
  if (text.size() > max_length) {
    return Invalid(field, absl::StrCat("longer than ", max_length, " bytes"));
  }
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
      return Invalid(field, "contains control characters");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateHost(absl::string_view field, absl::string_view host) {
  if (host.empty()) return Invalid(field, "required");
  if (host.size() > 253) return Invalid(field, "longer than 253 characters");
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '-' && c != '_' && c != ':') {
      return Invalid(field, absl::StrCat("bad character '", std::string(1, c), "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateAddress(absl::string_view field, absl::string_view address,
                             bool required) {
  if (address.empty()) {
    return required ? Invalid(field, "required (HOST:PORT)") : absl::OkStatus();
  }
  auto parsed = ParseHostPort(address);
  if (!parsed.ok()) return Invalid(field, parsed.status().message());
  return absl::OkStatus();
}

absl::Status ValidateRole(absl::string_view field, v1::NodeRole role,
                          bool allow_unspecified) {
  if (role == v1::NODE_ROLE_UNSPECIFIED && allow_unspecified) return absl::OkStatus();
  if (role != v1::WORKER && role != v1::ATTENTION_SERVER) {
    return Invalid(field, absl::StrCat("unknown role ", static_cast<int>(role),
                                       " (expected WORKER or ATTENTION_SERVER)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateServedDevice(const v1::Resources& resources) {
  const v1::ServedDevice& device = resources.device();
  if (!v1::Device_IsValid(device.kind())) {
    return Invalid("resources.device.kind",
                   absl::StrCat("unknown device ", static_cast<int>(device.kind()),
                                " (expected CPU or CUDA)"));
  }
  if (device.kind() != v1::CUDA) {
    if (device.cuda_index() != 0 || !device.gpu_model().empty() ||
        device.gpu_memory_bytes() != 0) {
      return Invalid("resources.device", "a CPU device has no cuda_index, gpu_model or memory");
    }
    return absl::OkStatus();
  }
  // The served GPU is one of the machine's.
  if (device.cuda_index() < 0 || device.cuda_index() >= resources.gpus()) {
    return Invalid("resources.device.cuda_index",
                   absl::StrCat("must be in [0, resources.gpus = ", resources.gpus(), "), got ",
                                device.cuda_index()));
  }
  if (absl::Status s = ValidateFreeText("resources.device.gpu_model", device.gpu_model(), 128);
      !s.ok()) {
    return s;
  }
  if (device.gpu_memory_bytes() < 0 || device.gpu_memory_bytes() > kMaxGpuMemoryBytes) {
    return Invalid("resources.device.gpu_memory_bytes",
                   absl::StrCat("must be in [0, ", kMaxGpuMemoryBytes, "], got ",
                                device.gpu_memory_bytes()));
  }
  return absl::OkStatus();
}

absl::Status ValidateResources(const v1::Resources& resources) {
  if (resources.cpu_cores() < 0 || resources.cpu_cores() > kMaxCpuCores) {
    return Invalid("resources.cpu_cores",
                   absl::StrCat("must be in [0, ", kMaxCpuCores, "], got ",
                                resources.cpu_cores()));
  }
  if (resources.memory_bytes() < 0 || resources.memory_bytes() > kMaxMemoryBytes) {
    return Invalid("resources.memory_bytes",
                   absl::StrCat("must be in [0, ", kMaxMemoryBytes, "], got ",
                                resources.memory_bytes()));
  }
  if (resources.gpus() < 0 || resources.gpus() > kMaxGpus) {
    return Invalid("resources.gpus", absl::StrCat("must be in [0, ", kMaxGpus,
                                                  "], got ", resources.gpus()));
  }
  if (resources.gpu_names_size() > resources.gpus()) {
    return Invalid("resources.gpu_names", "more names than resources.gpus");
  }
  for (const std::string& gpu_name : resources.gpu_names()) {
    if (absl::Status s = ValidateFreeText("resources.gpu_names", gpu_name, 128); !s.ok()) {
      return s;
    }
  }
  for (const auto& [field, root] :
       {std::pair{"resources.checkpoint_root", &resources.checkpoint_root()},
        std::pair{"resources.data_root", &resources.data_root()}}) {
    if (absl::Status s = ValidateFreeText(field, *root, kMaxPathBytes); !s.ok()) return s;
    if (!root->empty() && root->front() != '/') return Invalid(field, "must be an absolute path");
  }
  return ValidateServedDevice(resources);
}

}  // namespace

absl::Status ValidateRegisterRequest(const v1::RegisterRequest& request) {
  if (absl::Status s = ValidateNodeName("name", request.name()); !s.ok()) return s;
  if (absl::Status s = ValidateRole("role", request.role(), false); !s.ok()) return s;
  if (absl::Status s = ValidateHost("host", request.host()); !s.ok()) return s;
  if (request.pid() <= 0 || request.pid() > (int64_t{1} << 22)) {
    return Invalid("pid", absl::StrCat("must be in [1, 4194304], got ", request.pid()));
  }
  if (absl::Status s = ValidateAddress("grpc_address", request.grpc_address(), true);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateAddress("data_address", request.data_address(), false);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateResources(request.resources()); !s.ok()) return s;
  return ValidateFreeText("version", request.version(), 64);
}

absl::Status ValidateDeregisterRequest(const v1::DeregisterRequest& request) {
  if (absl::Status s = ValidateNodeName("name", request.name()); !s.ok()) return s;
  if (request.incarnation() == 0) return Invalid("incarnation", "required");
  return ValidateFreeText("reason", request.reason(), 1024);
}

absl::Status ValidateSessionOpen(const v1::NodeMessage& first_message) {
  if (!first_message.has_open()) {
    return Invalid("open", "the first message of a session must be SessionOpen");
  }
  if (absl::Status s = ValidateNodeName("open.name", first_message.open().name());
      !s.ok()) {
    return s;
  }
  if (first_message.open().incarnation() == 0) {
    return Invalid("open.incarnation", "required (from RegisterResponse)");
  }
  return absl::OkStatus();
}

absl::Status ValidateDrainNodeRequest(const v1::DrainNodeRequest& request) {
  if (absl::Status s = ValidateNodeName("name", request.name()); !s.ok()) return s;
  return ValidateFreeText("reason", request.reason(), 1024);
}

absl::Status ValidateListNodesRequest(const v1::ListNodesRequest& request) {
  if (absl::Status s = ValidateRole("role", request.role(), true); !s.ok()) return s;
  for (int state : request.states()) {
    if (!v1::NodeState_IsValid(state) || state == v1::NODE_STATE_UNSPECIFIED) {
      return Invalid("states", absl::StrCat("unknown node state ", state));
    }
  }
  return absl::OkStatus();
}

}  // namespace corescape::scheduler
