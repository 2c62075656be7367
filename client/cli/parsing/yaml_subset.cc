#include "client/cli/parsing/yaml_subset.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace corescape::cli {

namespace {

using nlohmann::json;

struct Line {
  int number = 0;   // 1-based, for messages
  int indent = 0;   // leading spaces
  std::string text;  // without indentation, comment and trailing blanks
};

bool StartsQuote(absl::string_view text, size_t i) {
  return i == 0 || text[i - 1] == ' ' || text[i - 1] == '[' ||
         text[i - 1] == ',';
}

// The line without a trailing comment ('#' at the start or after a blank,
// outside quotes).
std::string StripComment(absl::string_view text) {
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if ((quote == '"' && c == '\\') ||
          (quote == '\'' && c == '\'' && i + 1 < text.size() &&
           text[i + 1] == '\'')) {
        ++i;  // an escaped character, or '' inside '...'
      } else if (c == quote) {
        quote = 0;
      }
    } else if ((c == '"' || c == '\'') && StartsQuote(text, i)) {
      quote = c;
    } else if (c == '#' && (i == 0 || text[i - 1] == ' ')) {
      return std::string(text.substr(0, i));
    }
  }
  return std::string(text);
}

bool IsListItem(absl::string_view text) {
  return text == "-" || absl::StartsWith(text, "- ");
}

void AppendUtf8(uint32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    *out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    *out += static_cast<char>(0xC0 | (code_point >> 6));
    *out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    *out += static_cast<char>(0xE0 | (code_point >> 12));
    *out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

class Parser {
 public:
  Parser(std::vector<Line> lines, absl::string_view source)
      : lines_(std::move(lines)), source_(source) {}

  absl::StatusOr<json> ParseDocument() {
    if (lines_.empty()) return json::object();
    if (IsListItem(lines_[0].text)) {
      return Error(lines_[0],
                   "the top level must be 'key: value' lines, not a list");
    }
    absl::StatusOr<json> document = ParseMapping(lines_[0].indent);
    if (!document.ok()) return document;
    if (pos_ < lines_.size()) {
      return Error(lines_[pos_], "unexpected indentation");
    }
    return document;
  }

 private:
  absl::Status Error(const Line& line, absl::string_view why) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ":", line.number, ": ", why));
  }

  absl::StatusOr<json> ParseBlock(int indent) {
    if (IsListItem(lines_[pos_].text)) return ParseList(indent);
    return ParseMapping(indent);
  }

  absl::StatusOr<json> ParseMapping(int indent) {
    json mapping = json::object();
    while (pos_ < lines_.size() && lines_[pos_].indent >= indent) {
      const Line& line = lines_[pos_];
      if (line.indent > indent) return Error(line, "unexpected indentation");
      if (IsListItem(line.text)) {
        return Error(line, "a list item where 'key: value' was expected");
      }
      std::string key;
      absl::string_view rest;
      if (absl::Status split = SplitKey(line, &key, &rest); !split.ok()) {
        return split;
      }
      if (mapping.contains(key)) {
        return Error(line, absl::StrCat("duplicate key '", key, "'"));
      }
      ++pos_;
      absl::StatusOr<json> value;
      if (!rest.empty()) {
        value = ParseInline(line, rest);
      } else if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
        value = ParseBlock(lines_[pos_].indent);
      } else if (pos_ < lines_.size() && lines_[pos_].indent == indent &&
                 IsListItem(lines_[pos_].text)) {
        value = ParseList(indent);  // "key:" then "- item" at the same indent
      } else {
        value = json();  // "key:" alone is null
      }
      if (!value.ok()) return value;
      mapping[key] = *std::move(value);
    }
    return mapping;
  }

  absl::StatusOr<json> ParseList(int indent) {
    json list = json::array();
    while (pos_ < lines_.size() && lines_[pos_].indent == indent &&
           IsListItem(lines_[pos_].text)) {
      const Line& line = lines_[pos_];
      absl::string_view item =
          absl::StripAsciiWhitespace(absl::string_view(line.text).substr(1));
      ++pos_;
      if (item.empty()) {
        if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
          return Error(line, "nested blocks inside list items are not supported");
        }
        list.push_back(json());
        continue;
      }
      if (LooksLikeKeyValue(item)) {
        return Error(line, "mappings inside lists are not supported");
      }
      absl::StatusOr<json> value = ParseInline(line, item);
      if (!value.ok()) return value;
      list.push_back(*std::move(value));
    }
    if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
      return Error(lines_[pos_], "unexpected indentation");
    }
    return list;
  }

  // Splits "key: rest" (key plain or quoted).
  absl::Status SplitKey(const Line& line, std::string* key,
                        absl::string_view* rest) const {
    absl::string_view text = line.text;
    size_t after_key = 0;
    if (text[0] == '"' || text[0] == '\'') {
      absl::StatusOr<std::pair<std::string, size_t>> quoted =
          ParseQuoted(line, text);
      if (!quoted.ok()) return quoted.status();
      *key = quoted->first;
      after_key = quoted->second;
      while (after_key < text.size() && text[after_key] == ' ') ++after_key;
      if (after_key >= text.size() || text[after_key] != ':') {
        return Error(line, "expected ':' after the quoted key");
      }
    } else {
      after_key = std::string::npos;
      for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == ':' && (i + 1 == text.size() || text[i + 1] == ' ')) {
          after_key = i;
          break;
        }
      }
      if (after_key == std::string::npos) {
        return Error(line, absl::StrCat("expected 'key: value', got '", text,
                                        "'"));
      }
      *key = std::string(absl::StripAsciiWhitespace(text.substr(0, after_key)));
      if (key->empty()) return Error(line, "empty key");
      if (absl::StrContains(*key, '{') || absl::StrContains(*key, '[')) {
        return Error(line, "flow collections are not supported as keys");
      }
    }
    *rest = absl::StripAsciiWhitespace(text.substr(after_key + 1));
    return absl::OkStatus();
  }

  static bool LooksLikeKeyValue(absl::string_view text) {
    if (text[0] == '"' || text[0] == '\'' || text[0] == '[') return false;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == ':' && (i + 1 == text.size() || text[i + 1] == ' ')) {
        return true;
      }
    }
    return false;
  }

  // A value on the same line as its key or list dash.
  absl::StatusOr<json> ParseInline(const Line& line, absl::string_view text) {
    const char first = text[0];
    if (first == '|' || first == '>') {
      return Error(line, "block scalars (| and >) are not supported");
    }
    if (first == '&' || first == '*' || first == '!') {
      return Error(line, "anchors, aliases and tags are not supported");
    }
    if (first == '{') {
      if (text == "{}") return json::object();
      return Error(line,
                   "flow mappings ({...}) are not supported; use indented "
                   "'key: value' lines");
    }
    if (first == '[') return ParseFlowList(line, text);
    return ParseScalar(line, text);
  }

  absl::StatusOr<json> ParseFlowList(const Line& line, absl::string_view text) {
    if (text.back() != ']') {
      return Error(line, "a flow list must end with ']' on the same line");
    }
    json list = json::array();
    absl::string_view inner =
        absl::StripAsciiWhitespace(text.substr(1, text.size() - 2));
    if (inner.empty()) return list;
    size_t start = 0;
    char quote = 0;
    for (size_t i = 0; i <= inner.size(); ++i) {
      if (i < inner.size()) {
        const char c = inner[i];
        if (quote != 0) {
          if ((quote == '"' && c == '\\') ||
              (quote == '\'' && c == '\'' && i + 1 < inner.size() &&
               inner[i + 1] == '\'')) {
            ++i;
          } else if (c == quote) {
            quote = 0;
          }
          continue;
        }
        if ((c == '"' || c == '\'') &&
            absl::StripAsciiWhitespace(inner.substr(start, i - start)).empty()) {
          quote = c;
          continue;
        }
        if (c == '[' || c == '{' || c == ']' || c == '}') {
          return Error(line, "nested flow collections are not supported");
        }
        if (c != ',') continue;
      }
      absl::string_view item =
          absl::StripAsciiWhitespace(inner.substr(start, i - start));
      if (item.empty()) return Error(line, "empty item in a flow list");
      absl::StatusOr<json> value = ParseScalar(line, item);
      if (!value.ok()) return value;
      list.push_back(*std::move(value));
      start = i + 1;
    }
    if (quote != 0) return Error(line, "unterminated quoted string");
    return list;
  }

  absl::StatusOr<json> ParseScalar(const Line& line, absl::string_view text) {
    if (text[0] == '"' || text[0] == '\'') {
      absl::StatusOr<std::pair<std::string, size_t>> quoted =
          ParseQuoted(line, text);
      if (!quoted.ok()) return quoted.status();
      if (quoted->second != text.size()) {
        return Error(line, "unexpected text after a quoted string");
      }
      return json(quoted->first);
    }
    if (text == "~" || text == "null" || text == "Null" || text == "NULL") {
      return json();
    }
    for (size_t i = 0; i + 1 < text.size(); ++i) {
      if (text[i] == ':' && text[i + 1] == ' ') {
        return Error(line, "': ' inside a plain value; quote the value");
      }
    }
    return json(std::string(text));
  }

  // A quoted string at the start of `text`: its value and the length used.
  absl::StatusOr<std::pair<std::string, size_t>> ParseQuoted(
      const Line& line, absl::string_view text) const {
    const char quote = text[0];
    std::string value;
    for (size_t i = 1; i < text.size(); ++i) {
      const char c = text[i];
      if (quote == '\'') {
        if (c == '\'') {
          if (i + 1 < text.size() && text[i + 1] == '\'') {
            value += '\'';
            ++i;
            continue;
          }
          return std::make_pair(value, i + 1);
        }
        value += c;
        continue;
      }
      if (c == '"') return std::make_pair(value, i + 1);
      if (c != '\\') {
        value += c;
        continue;
      }
      if (++i >= text.size()) break;
      switch (text[i]) {
        case '"': value += '"'; break;
        case '\\': value += '\\'; break;
        case '/': value += '/'; break;
        case 'n': value += '\n'; break;
        case 'r': value += '\r'; break;
        case 't': value += '\t'; break;
        case 'u': {
          uint32_t code_point = 0;
          if (i + 4 >= text.size() ||
              !absl::SimpleHexAtoi(text.substr(i + 1, 4), &code_point)) {
            return Error(line, "\\u needs four hex digits");
          }
          AppendUtf8(code_point, &value);
          i += 4;
          break;
        }
        default:
          return Error(line, absl::StrCat("unsupported escape '\\",
                                          std::string(1, text[i]), "'"));
      }
    }
    return Error(line, "unterminated quoted string");
  }

  std::vector<Line> lines_;
  size_t pos_ = 0;
  std::string source_;
};

}  // namespace

absl::StatusOr<json> ParseYamlSubset(absl::string_view text,
                                     absl::string_view source) {
  std::vector<Line> lines;
  int number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++number;
    if (absl::EndsWith(raw, "\r")) raw.remove_suffix(1);
    size_t indent = 0;
    while (indent < raw.size() && (raw[indent] == ' ' || raw[indent] == '\t')) {
      if (raw[indent] == '\t') {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ":", number, ": tabs are not allowed in indentation"));
      }
      ++indent;
    }
    std::string content = StripComment(raw.substr(indent));
    absl::StripTrailingAsciiWhitespace(&content);
    if (content.empty()) continue;
    if (content == "---" && lines.empty()) continue;  // document start
    if (content == "---" || content == "...") {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", number, ": only one YAML document is supported"));
    }
    lines.push_back({number, static_cast<int>(indent), std::move(content)});
  }
  return Parser(std::move(lines), source).ParseDocument();
}

}  // namespace corescape::cli
