// The subset of YAML that job files need, read into JSON, so that a job
// file can be written as YAML without a YAML library:
//
//   name: tiny-fortunes          # comments after '#'
//   model:
//     preset: tiny
//   data:
//     train_shards: [.cache/fortunes]     # flow list of scalars
//     validation_shards:
//       - .cache/fortunes                 # or block list (same or deeper indent)
//   optimizer: {}                         # only the empty flow mapping
//
// Supported: nested block mappings (indentation by spaces), block lists of
// scalars, one-line flow lists of scalars, plain, 'single' and "double"
// quoted scalars (\" \\ \/ \n \r \t \uXXXX escapes), '~'/null, comments,
// a leading '---'. Not supported (an error naming the line): tabs in
// indentation, flow mappings other than {}, mappings inside lists, block
// scalars (| >), anchors, aliases, tags, several documents.
//
// Plain scalars other than null become JSON strings ("300", "0.1", "true"):
// protobuf's JSON parser reads numbers and booleans from strings, so each
// value takes the type of its JobSpec field.
#ifndef CORESCAPE_CLIENT_CLI_PARSING_YAML_SUBSET_H_
#define CORESCAPE_CLIENT_CLI_PARSING_YAML_SUBSET_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {

// The document's top-level mapping. INVALID_ARGUMENT "SOURCE:LINE: why".
absl::StatusOr<nlohmann::json> ParseYamlSubset(absl::string_view text,
                                               absl::string_view source);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_PARSING_YAML_SUBSET_H_
