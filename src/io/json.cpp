// The JSON reader and writer of src/io/json.h: recursive descent with a depth limit; strings are
// validated as UTF-8 and \u escapes (with surrogate pairs) decoded to UTF-8.
#include "io/json.h"

#include <algorithm>
#include <stdexcept>

namespace kiln::io::json {

namespace {

constexpr int kMaxDepth = 64;

// Length of the UTF-8 sequence starting at s[i], or 0 if it is not a valid one (overlong forms,
// surrogates and code points above U+10FFFF are invalid).
size_t utf8_len(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0)
    n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; k++) {
    auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void put_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Value document() {
    skip_ws();
    Value v = value(0);
    skip_ws();
    if (i_ != s_.size()) error("unexpected data after the JSON value");
    return v;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;

  [[noreturn]] void error(const std::string& what) const {
    throw std::runtime_error(what + " at byte " + std::to_string(i_));
  }
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[i_]; }
  void skip_ws() {
    while (!at_end() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) i_++;
  }
  void expect(char c) {
    if (peek() != c || at_end()) error(std::string("expected '") + c + "'");
    i_++;
  }
  void literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) error("invalid literal");
    i_ += word.size();
  }

  Value value(int depth) {
    if (depth > kMaxDepth) error("nesting deeper than " + std::to_string(kMaxDepth));
    if (at_end()) error("unexpected end of JSON");
    Value v;
    switch (peek()) {
      case '{': object(v, depth); break;
      case '[': array(v, depth); break;
      case '"':
        v.kind = Value::Kind::String;
        v.text = string();
        break;
      case 't':
        literal("true");
        v.kind = Value::Kind::Bool, v.b = true;
        break;
      case 'f':
        literal("false");
        v.kind = Value::Kind::Bool, v.b = false;
        break;
      case 'n': literal("null"); break;
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) {
          v.kind = Value::Kind::Number;
          v.text = number();
        } else {
          error("unexpected character");
        }
    }
    return v;
  }

  void object(Value& v, int depth) {
    v.kind = Value::Kind::Object;
    expect('{');
    skip_ws();
    if (peek() == '}') {
      i_++;
      return;
    }
    std::vector<size_t> key_at;
    for (;;) {
      skip_ws();
      if (peek() != '"') error("expected a string key");
      key_at.push_back(i_);
      std::string key = string();
      skip_ws();
      expect(':');
      skip_ws();
      v.members.emplace_back(std::move(key), value(depth + 1));
      skip_ws();
      if (peek() == ',' && !at_end()) {
        i_++;
        continue;
      }
      expect('}');
      check_unique_keys(v, key_at);
      return;
    }
  }

  // Duplicate keys by sorting, not by comparing each key with all before it (a header may have
  // 10^5 tensors: that took a minute); the error points at the later of the two.
  void check_unique_keys(const Value& v, const std::vector<size_t>& key_at) {
    if (v.members.size() < 2) return;
    std::vector<size_t> order(v.members.size());
    for (size_t k = 0; k < order.size(); k++) order[k] = k;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return v.members[a].first != v.members[b].first ? v.members[a].first < v.members[b].first : a < b;
    });
    for (size_t k = 1; k < order.size(); k++)
      if (v.members[order[k]].first == v.members[order[k - 1]].first) {
        i_ = key_at[order[k]];
        error("duplicate key \"" + v.members[order[k]].first + "\"");
      }
  }

  void array(Value& v, int depth) {
    v.kind = Value::Kind::Array;
    expect('[');
    skip_ws();
    if (peek() == ']') {
      i_++;
      return;
    }
    for (;;) {
      skip_ws();
      v.items.push_back(value(depth + 1));
      skip_ws();
      if (peek() == ',' && !at_end()) {
        i_++;
        continue;
      }
      expect(']');
      return;
    }
  }

  uint32_t hex4() {
    if (i_ + 4 > s_.size()) error("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
      char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<uint32_t>(c - 'A' + 10);
      else
        error("invalid \\u escape");
    }
    return v;
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (at_end()) error("unterminated string");
      auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        i_++;
        return out;
      }
      if (c < 0x20) error("control character in string");
      if (c == '\\') {
        i_++;
        if (at_end()) error("unterminated string");
        char e = s_[i_++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp = hex4();
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (s_.substr(i_, 2) != "\\u") error("unpaired surrogate in \\u escape");
              i_ += 2;
              uint32_t lo = hex4();
              if (lo < 0xDC00 || lo > 0xDFFF) error("unpaired surrogate in \\u escape");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
              error("unpaired surrogate in \\u escape");
            }
            put_utf8(out, cp);
            break;
          }
          default: i_--, error("invalid escape");
        }
        continue;
      }
      size_t n = utf8_len(s_, i_);
      if (n == 0) error("invalid UTF-8 in string");
      out.append(s_.substr(i_, n));
      i_ += n;
    }
  }

  std::string number() {
    size_t start = i_;
    auto digits = [&] {
      size_t d = i_;
      while (!at_end() && s_[i_] >= '0' && s_[i_] <= '9') i_++;
      if (i_ == d) error("invalid number");
    };
    if (peek() == '-') i_++;
    if (peek() == '0' && !at_end()) {
      i_++;
    } else {
      digits();
    }
    if (peek() == '.' && !at_end()) {
      i_++;
      digits();
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      i_++;
      if (peek() == '+' || peek() == '-') i_++;
      digits();
    }
    return std::string(s_.substr(start, i_ - start));
  }
};

}  // namespace

const Value* Value::find(std::string_view key) const {
  for (auto& m : members)
    if (m.first == key) return &m.second;
  return nullptr;
}

std::optional<uint64_t> Value::as_u64() const {
  if (kind != Kind::Number || text.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    auto d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

const char* Value::kind_name(Kind k) {
  switch (k) {
    case Kind::Null: return "null";
    case Kind::Bool: return "a boolean";
    case Kind::Number: return "a number";
    case Kind::String: return "a string";
    case Kind::Array: return "an array";
    case Kind::Object: return "an object";
  }
  return "?";
}

Value parse(std::string_view text) { return Parser(text).document(); }

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool append_string(std::string& out, std::string_view s) {
  if (!valid_utf8(s)) return false;
  static const char* kHex = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  out += '"';
  return true;
}

}  // namespace kiln::io::json
