// A small JSON reader and writer for file headers (safetensors): strict RFC 8259 parsing with
// exact integers, duplicate-key and depth checks; compact output with escaped UTF-8 strings.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::io::json {

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool b = false;
  std::string text;          // String: the decoded string; Number: the number as written
  std::vector<Value> items;  // Array
  std::vector<std::pair<std::string, Value>> members;  // Object, in file order, keys unique

  const Value* find(std::string_view key) const;  // Object member or nullptr
  // A Number written as a nonnegative integer that fits in uint64 (no sign, fraction or exponent).
  std::optional<uint64_t> as_u64() const;
  static const char* kind_name(Kind k);
};

// Parses exactly one JSON value (surrounding whitespace allowed); throws std::runtime_error with
// the byte offset of the problem. Strings must be valid UTF-8.
Value parse(std::string_view text);

// Appends s as a JSON string literal; returns false (appending nothing) if s is not valid UTF-8.
bool append_string(std::string& out, std::string_view s);
bool valid_utf8(std::string_view s);

}  // namespace kiln::io::json
