#include "scheduler/request_validation.h"

#include <string>

#include "gtest/gtest.h"

namespace corescape::scheduler {
namespace {

v1::RegisterRequest ValidRequest() {
  v1::RegisterRequest request;
  request.set_name("gpu-node-07.worker_0");
  request.set_role(v1::WORKER);
  request.set_host("gpu-node-07");
  request.set_pid(4242);
  request.set_grpc_address("gpu-node-07:7071");
  request.set_data_address("10.1.2.3:13337");
  request.mutable_resources()->set_cpu_cores(72);
  request.mutable_resources()->set_memory_bytes(int64_t{480} << 30);
  request.mutable_resources()->set_gpus(1);
  request.mutable_resources()->add_gpu_names("NVIDIA GH200");
  return request;
}

// Expects INVALID_ARGUMENT whose message starts with the field's name.
void ExpectRejected(const v1::RegisterRequest& request, const std::string& field) {
  absl::Status status = ValidateRegisterRequest(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_EQ(status.message().substr(0, field.size() + 1), field + ":") << status;
}

TEST(RequestValidationTest, AcceptsWellFormedRequest) {
  EXPECT_TRUE(ValidateRegisterRequest(ValidRequest()).ok());
}

TEST(RequestValidationTest, RejectsBadNames) {
  for (const std::string& name :
       {std::string(""), std::string(64, 'a'), std::string("-leading"),
        std::string("has space"), std::string("semi;colon"), std::string("slash/x"),
        std::string("nul\0byte", 8), std::string("\xc3\xa9t\xc3\xa9")}) {
    auto request = ValidRequest();
    request.set_name(name);
    ExpectRejected(request, "name");
  }
  auto request = ValidRequest();
  request.set_name(std::string(63, 'a'));
  EXPECT_TRUE(ValidateRegisterRequest(request).ok());
}

TEST(RequestValidationTest, RejectsUnknownRole) {
  auto request = ValidRequest();
  request.set_role(v1::NODE_ROLE_UNSPECIFIED);
  ExpectRejected(request, "role");
  request.set_role(static_cast<v1::NodeRole>(99));
  ExpectRejected(request, "role");
}

TEST(RequestValidationTest, RejectsMalformedAddresses) {
  for (const char* address : {"", "nohostport", "host:0", "host:99999", ":80",
                              "bad host:80"}) {
    auto request = ValidRequest();
    request.set_grpc_address(address);
    ExpectRejected(request, "grpc_address");
  }
  auto request = ValidRequest();
  request.set_data_address("10.0.0.1");
  ExpectRejected(request, "data_address");
  request.set_data_address("");  // optional
  EXPECT_TRUE(ValidateRegisterRequest(request).ok());
}

TEST(RequestValidationTest, RejectsAbsurdResources) {
  auto request = ValidRequest();
  request.mutable_resources()->set_cpu_cores(-1);
  ExpectRejected(request, "resources.cpu_cores");
  request = ValidRequest();
  request.mutable_resources()->set_cpu_cores(1 << 20);
  ExpectRejected(request, "resources.cpu_cores");
  request = ValidRequest();
  request.mutable_resources()->set_memory_bytes(-5);
  ExpectRejected(request, "resources.memory_bytes");
  request = ValidRequest();
  request.mutable_resources()->set_memory_bytes(int64_t{1} << 62);
  ExpectRejected(request, "resources.memory_bytes");
  request = ValidRequest();
  request.mutable_resources()->set_gpus(100000);
  ExpectRejected(request, "resources.gpus");
  request = ValidRequest();
  request.mutable_resources()->add_gpu_names("second name for one gpu");
  ExpectRejected(request, "resources.gpu_names");
}

TEST(RequestValidationTest, CheckpointRootIsAnAbsoluteBoundedPath) {
  v1::RegisterRequest request = ValidRequest();
  request.mutable_resources()->set_checkpoint_root("/var/lib/corescape/worker");
  EXPECT_TRUE(ValidateRegisterRequest(request).ok());
  for (const std::string& bad :
       {std::string("relative/root"), std::string("/a\nb"), std::string("/a\0b", 4),
        "/" + std::string(kMaxPathBytes, 'x')}) {
    request.mutable_resources()->set_checkpoint_root(bad);
    ExpectRejected(request, "resources.checkpoint_root");
  }
}

TEST(RequestValidationTest, DataRootIsAnAbsoluteBoundedPath) {
  v1::RegisterRequest request = ValidRequest();
  request.mutable_resources()->set_data_root("/srv/corescape/data");
  EXPECT_TRUE(ValidateRegisterRequest(request).ok());
  for (const std::string& bad :
       {std::string("relative/root"), std::string("/a\nb"), std::string("/a\0b", 4),
        "/" + std::string(kMaxPathBytes, 'x')}) {
    request.mutable_resources()->set_data_root(bad);
    ExpectRejected(request, "resources.data_root");
  }
}

TEST(RequestValidationTest, ServedDeviceIsBounded) {
  auto request = ValidRequest();
  v1::ServedDevice& device = *request.mutable_resources()->mutable_device();
  device.set_kind(v1::CUDA);
  device.set_cuda_index(0);
  device.set_gpu_model("NVIDIA GH200 480GB");
  device.set_gpu_memory_bytes(int64_t{96} << 30);
  EXPECT_TRUE(ValidateRegisterRequest(request).ok());

  auto bad = request;
  bad.mutable_resources()->mutable_device()->set_kind(static_cast<v1::Device>(9));
  ExpectRejected(bad, "resources.device.kind");
  bad = request;
  bad.mutable_resources()->mutable_device()->set_cuda_index(1);  // the node has one GPU
  ExpectRejected(bad, "resources.device.cuda_index");
  bad = request;
  bad.mutable_resources()->mutable_device()->set_cuda_index(-1);
  ExpectRejected(bad, "resources.device.cuda_index");
  bad = request;
  bad.mutable_resources()->set_gpus(0);
  bad.mutable_resources()->clear_gpu_names();
  ExpectRejected(bad, "resources.device.cuda_index");
  bad = request;
  bad.mutable_resources()->mutable_device()->set_gpu_model(std::string(200, 'x'));
  ExpectRejected(bad, "resources.device.gpu_model");
  bad = request;
  bad.mutable_resources()->mutable_device()->set_gpu_model("line\nbreak");
  ExpectRejected(bad, "resources.device.gpu_model");
  bad = request;
  bad.mutable_resources()->mutable_device()->set_gpu_memory_bytes(-1);
  ExpectRejected(bad, "resources.device.gpu_memory_bytes");
  bad = request;
  bad.mutable_resources()->mutable_device()->set_gpu_memory_bytes(int64_t{1} << 60);
  ExpectRejected(bad, "resources.device.gpu_memory_bytes");

  // A CPU worker names no GPU.
  bad = request;
  bad.mutable_resources()->mutable_device()->set_kind(v1::CPU);
  ExpectRejected(bad, "resources.device");
  auto cpu = ValidRequest();
  cpu.mutable_resources()->mutable_device()->set_kind(v1::CPU);
  EXPECT_TRUE(ValidateRegisterRequest(cpu).ok());
}

TEST(RequestValidationTest, RejectsMissingHostAndBadPid) {
  auto request = ValidRequest();
  request.set_host("");
  ExpectRejected(request, "host");
  request = ValidRequest();
  request.set_pid(0);
  ExpectRejected(request, "pid");
  request = ValidRequest();
  request.set_pid(-7);
  ExpectRejected(request, "pid");
  request = ValidRequest();
  request.set_version(std::string(1000, 'v'));
  ExpectRejected(request, "version");
}

TEST(RequestValidationTest, SessionMustOpenWithNameAndIncarnation) {
  v1::NodeMessage message;
  message.mutable_heartbeat();
  EXPECT_EQ(ValidateSessionOpen(message).code(), absl::StatusCode::kInvalidArgument);
  message.mutable_open()->set_name("w0");
  EXPECT_NE(ValidateSessionOpen(message).message().find("open.incarnation"),
            std::string::npos);
  message.mutable_open()->set_incarnation(3);
  EXPECT_TRUE(ValidateSessionOpen(message).ok());
}

TEST(RequestValidationTest, OperatorRequests) {
  v1::DrainNodeRequest drain;
  EXPECT_EQ(ValidateDrainNodeRequest(drain).code(), absl::StatusCode::kInvalidArgument);
  drain.set_name("w0");
  EXPECT_TRUE(ValidateDrainNodeRequest(drain).ok());
  v1::ListNodesRequest list;
  list.add_states(static_cast<v1::NodeState>(77));
  EXPECT_EQ(ValidateListNodesRequest(list).code(), absl::StatusCode::kInvalidArgument);
  list.clear_states();
  list.set_role(static_cast<v1::NodeRole>(12));
  EXPECT_EQ(ValidateListNodesRequest(list).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace corescape::scheduler
