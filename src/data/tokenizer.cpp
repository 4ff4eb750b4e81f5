// data::CharTokenizer (sorted unique code points of a UTF-8 text) and data::ByteTokenizer (256 ids).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <sstream>

#include "data/io.h"
#include "kiln/data.h"

namespace kiln::data {

namespace {
const char* kHeader = "kiln-char-tokenizer 1";
constexpr uint64_t kMaxVocab = 0x110000 - 0x800;  // code points less the surrogates

// `s` as a decimal number (digits only, the whole string) if it is at most `max`, else nullopt:
// never wrapped or truncated (2^32 + 97 is not 'a').
std::optional<uint64_t> parse_decimal(const std::string& s, uint64_t max) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}

// A line of the file as quoted in messages: at most 40 bytes.
std::string shown(const std::string& line) { return line.size() <= 40 ? line : line.substr(0, 40) + "..."; }

std::vector<char32_t> utf8_decode(const std::string& s, const std::string& what) {
  std::vector<char32_t> out;
  size_t i = 0;
  auto bad = [&] { return Error("kiln: " + what + ": invalid UTF-8 at byte " + std::to_string(i)); };
  while (i < s.size()) {
    auto c = static_cast<uint8_t>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) throw bad();
    char32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (int k = 1; k < len; k++) {
      auto d = static_cast<uint8_t>(s[i + k]);
      if ((d >> 6) != 2) throw bad();
      cp = cp << 6 | (d & 0x3f);
    }
    static const char32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      throw bad();  // overlong, surrogates
    out.push_back(cp);
    i += len;
  }
  return out;
}

void utf8_append(std::string& s, char32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | cp >> 6);
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | cp >> 12);
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | cp >> 18);
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
}
// "U+65E5": the usual notation, hex with at least 4 digits
std::string code_point(char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  return buf;
}
}  // namespace

CharTokenizer::CharTokenizer(std::vector<char32_t> vocab) : vocab_(std::move(vocab)) {
  for (size_t k = 0; k < vocab_.size(); k++) {
    if (vocab_[k] > 0x10ffff || (vocab_[k] >= 0xd800 && vocab_[k] <= 0xdfff))
      throw Error("kiln: data::CharTokenizer: " + std::to_string(vocab_[k]) + " (" + code_point(vocab_[k]) +
                  ") is not a Unicode code point");
    if (k > 0 && vocab_[k] <= vocab_[k - 1])
      throw Error("kiln: data::CharTokenizer: the vocabulary must be sorted and unique (entry " +
                  std::to_string(k) + ")");
  }
}

CharTokenizer CharTokenizer::from_text(const std::string& utf8) {
  auto cps = utf8_decode(utf8, "data::CharTokenizer::from_text");
  std::sort(cps.begin(), cps.end());
  cps.erase(std::unique(cps.begin(), cps.end()), cps.end());
  return CharTokenizer(std::move(cps));
}

std::vector<int64_t> CharTokenizer::encode(const std::string& utf8) const {
  std::vector<int64_t> ids;
  for (char32_t cp : utf8_decode(utf8, "data::CharTokenizer::encode")) {
    auto it = std::lower_bound(vocab_.begin(), vocab_.end(), cp);
    if (it == vocab_.end() || *it != cp) {
      std::string ch;
      utf8_append(ch, cp);
      throw Error("kiln: data::CharTokenizer::encode: character \"" + ch + "\" (" + code_point(cp) +
                  ") is not in the vocabulary of " + std::to_string(vocab_.size()));
    }
    ids.push_back(it - vocab_.begin());
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw Error("kiln: data::CharTokenizer::decode: id " + std::to_string(id) +
                  " out of range for a vocabulary of " + std::to_string(vocab_.size()));
    utf8_append(s, vocab_[static_cast<size_t>(id)]);
  }
  return s;
}

void CharTokenizer::save(const std::string& path) const {
  std::string s = std::string(kHeader) + "\n" + std::to_string(vocab_.size()) + "\n";
  for (char32_t cp : vocab_) s += std::to_string(static_cast<uint32_t>(cp)) + "\n";
  io::write_file("data::CharTokenizer::save", path, s.data(), s.size());
}

CharTokenizer CharTokenizer::load(const std::string& path) {
  const std::string what = "data::CharTokenizer::load";
  auto bytes = io::read_file(what, path);
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  auto bad = [&](const std::string& msg) { return Error("kiln: " + what + ": \"" + path + "\": " + msg); };
  std::string line;
  if (!std::getline(in, line) || line != kHeader)
    throw bad("not a character tokenizer file (first line \"" + shown(line) + "\")");
  if (!std::getline(in, line)) throw bad("missing the vocabulary size");
  auto n = parse_decimal(line, kMaxVocab);
  if (!n)
    throw bad("bad vocabulary size \"" + shown(line) + "\" (a number in [0, " + std::to_string(kMaxVocab) +
              "]: distinct Unicode code points)");
  std::vector<char32_t> vocab;
  for (uint64_t k = 0; k < *n; k++) {
    if (!std::getline(in, line))
      throw bad("truncated: " + std::to_string(k) + " of " + std::to_string(*n) + " entries");
    auto cp = parse_decimal(line, 0x10ffff);
    if (!cp)
      throw bad("bad entry " + std::to_string(k) + ": \"" + shown(line) +
                "\" (a code point is a number in [0, " + std::to_string(0x10ffff) + "])");
    vocab.push_back(static_cast<char32_t>(*cp));
  }
  try {
    return CharTokenizer(std::move(vocab));
  } catch (const Error& e) {
    throw bad(e.what());
  }
}

std::vector<int64_t> ByteTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  s.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id > 255)
      throw Error("kiln: data::ByteTokenizer::decode: id " + std::to_string(id) + " is outside [0, 256)");
    s += static_cast<char>(static_cast<uint8_t>(id));
  }
  return s;
}

}  // namespace kiln::data
