#include "client/cli/parsing/proto_json.h"

#include <cmath>
#include <vector>

#include "google/protobuf/descriptor.h"

namespace corescape::cli {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

nlohmann::json Finite(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
}

nlohmann::json SingularValue(const Message& message, const Reflection& reflection,
                             const FieldDescriptor& field) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return reflection.GetInt32(message, &field);
    case FieldDescriptor::CPPTYPE_INT64:
      return reflection.GetInt64(message, &field);
    case FieldDescriptor::CPPTYPE_UINT32:
      return reflection.GetUInt32(message, &field);
    case FieldDescriptor::CPPTYPE_UINT64:
      return reflection.GetUInt64(message, &field);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return Finite(reflection.GetDouble(message, &field));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return Finite(reflection.GetFloat(message, &field));
    case FieldDescriptor::CPPTYPE_BOOL:
      return reflection.GetBool(message, &field);
    case FieldDescriptor::CPPTYPE_ENUM:
      return reflection.GetEnum(message, &field)->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return reflection.GetString(message, &field);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToJson(reflection.GetMessage(message, &field));
  }
  return nullptr;
}

nlohmann::json RepeatedValue(const Message& message,
                             const Reflection& reflection,
                             const FieldDescriptor& field, int index) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return reflection.GetRepeatedInt32(message, &field, index);
    case FieldDescriptor::CPPTYPE_INT64:
      return reflection.GetRepeatedInt64(message, &field, index);
    case FieldDescriptor::CPPTYPE_UINT32:
      return reflection.GetRepeatedUInt32(message, &field, index);
    case FieldDescriptor::CPPTYPE_UINT64:
      return reflection.GetRepeatedUInt64(message, &field, index);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return Finite(reflection.GetRepeatedDouble(message, &field, index));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return Finite(reflection.GetRepeatedFloat(message, &field, index));
    case FieldDescriptor::CPPTYPE_BOOL:
      return reflection.GetRepeatedBool(message, &field, index);
    case FieldDescriptor::CPPTYPE_ENUM:
      return reflection.GetRepeatedEnum(message, &field, index)->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return reflection.GetRepeatedString(message, &field, index);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToJson(reflection.GetRepeatedMessage(message, &field, index));
  }
  return nullptr;
}

}  // namespace

nlohmann::json ProtoToJson(const Message& message) {
  const Reflection& reflection = *message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection.ListFields(message, &fields);  // set fields, in field-number order
  nlohmann::json json = nlohmann::json::object();
  for (const FieldDescriptor* field : fields) {
    if (field->is_repeated()) {
      nlohmann::json array = nlohmann::json::array();
      const int size = reflection.FieldSize(message, field);
      for (int i = 0; i < size; ++i) {
        array.push_back(RepeatedValue(message, reflection, *field, i));
      }
      json[field->name()] = std::move(array);
    } else {
      json[field->name()] = SingularValue(message, reflection, *field);
    }
  }
  return json;
}

}  // namespace corescape::cli
