// Any protobuf message as nlohmann::json, keyed by the proto field names
// (snake_case), enums by name, 64-bit integers as JSON numbers (protobuf's
// own JSON printer quotes them). Only fields that are set appear, so a
// JobSpec prints as a job file `corescape submit` reads back.
#ifndef CORESCAPE_CLIENT_CLI_PARSING_PROTO_JSON_H_
#define CORESCAPE_CLIENT_CLI_PARSING_PROTO_JSON_H_

#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {

// Non-finite doubles become null (JSON has no NaN).
nlohmann::json ProtoToJson(const google::protobuf::Message& message);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_PARSING_PROTO_JSON_H_
