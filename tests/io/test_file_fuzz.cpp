// File-format fuzzing of every reader of files kiln did not necessarily write: safetensors,
// checkpoints, llm.c token shards, MNIST idx images and labels, character tokenizers. A valid file of
// each format is mutated deterministically (truncations at interesting offsets, bit flips, huge
// counts and lengths in header fields and header numbers, random garbage, inserted and removed
// bytes); each mutant must load what the file holds or give a kiln::Error, never crash, hang, load
// something else (a wrapped number) or throw anything else.
// KILN_FUZZ_FILES=N runs N mutants per format (default 500; `make fuzz-files` runs 10000).
#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>

#include "io/io_test_util.h"

namespace kiln {
namespace {

// A numeric header field of a binary format.
struct Field {
  size_t offset, width;
  bool big_endian;
};

struct Format {
  std::string name;
  std::string file;           // a valid file
  std::vector<Field> fields;  // its binary header fields
  size_t header_end;          // where its header ends (0: none)
  bool json_header;           // safetensors: an 8-byte length then JSON
  bool text;                  // numbers in lines (the tokenizer)
  // loads the file at a path and says how the result disagrees with the file's bytes ("" if not)
  std::function<std::string(const std::string&, const std::string&)> load;
};

const uint64_t kHuge[] = {0,          1,          2,          255,        1023,       1024,
                          65535,      65536,      0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff,
                          1ull << 32, 1ull << 40, 1ull << 62, 1ull << 63, ~0ull >> 1, ~0ull};
const char* kHugeText[] = {"0",
                           "-1",
                           "1.5",
                           "1e30",
                           "4294967295",
                           "4294967296",
                           "4294967393",
                           "9223372036854775807",
                           "9223372036854775808",
                           "18446744073709551615",
                           "18446744073709551616",
                           "99999999999999999999999999999",
                           ""};

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int k = 0; k < 8; k++) s[k] = static_cast<char>(v >> (8 * k));
  return s;
}

void put(std::string& s, const Field& f, uint64_t v) {
  for (size_t k = 0; k < f.width && f.offset + k < s.size(); k++) {
    size_t shift = 8 * (f.big_endian ? f.width - 1 - k : k);
    s[f.offset + k] = static_cast<char>(shift < 64 ? v >> shift : 0);
  }
}

// [begin, end) of each run of digits in s[from, to)
std::vector<std::pair<size_t, size_t>> digit_runs(const std::string& s, size_t from, size_t to) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t i = from; i < to;) {
    if (s[i] < '0' || s[i] > '9') {
      i++;
      continue;
    }
    size_t b = i;
    while (i < to && s[i] >= '0' && s[i] <= '9') i++;
    runs.push_back({b, i});
  }
  return runs;
}

// The little-endian number of `width` bytes at `at` (0 past the end).
uint64_t le(const std::string& s, size_t at, size_t width) {
  uint64_t v = 0;
  for (size_t k = 0; k < width && at + k < s.size(); k++)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + k])) << (8 * k);
  return v;
}

// Loaded safetensors tensors against the file: each shape's elements are its numel, and together
// they fill the data section exactly.
std::string tensors_match(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b,
                          const std::string& bytes) {
  uint64_t total = 0;
  for (const auto* ts : {&a, &b})
    for (auto& [name, t] : *ts) {
      int64_t n = 1;
      for (int64_t d : t.shape())
        if (__builtin_mul_overflow(n, d, &n)) return name + ": shape overflows";
      if (n != t.numel()) return name + ": numel " + std::to_string(t.numel());
      total += static_cast<uint64_t>(n) * static_cast<uint64_t>(dtype_size(t.dtype()));
    }
  return total + 8 + le(bytes, 0, 8) == bytes.size() ? "" : std::to_string(total) + " bytes of tensors";
}

// A loaded MNIST tensor against its idx file: dims as in the header, one byte of data per element.
std::string idx_matches(const Tensor& t, size_t ndims, const std::string& bytes) {
  if (t.shape().size() != ndims) return "rank " + std::to_string(t.shape().size());
  for (size_t d = 0; d < ndims; d++) {
    uint64_t want = 0;
    for (size_t k = 0; k < 4; k++) want = want << 8 | static_cast<unsigned char>(bytes[4 + 4 * d + k]);
    if (static_cast<uint64_t>(t.shape()[d]) != want) return "dim " + std::to_string(d);
  }
  return 4 + 4 * ndims + static_cast<uint64_t>(t.numel()) == bytes.size()
             ? ""
             : "numel " + std::to_string(t.numel());
}

// Mutant `i` of format `f`, and what was done to it (for the failure message).
std::pair<std::string, std::string> mutate(const Format& f, uint64_t i) {
  std::mt19937_64 rng(i * 0x9e3779b97f4a7c15ull + std::hash<std::string>{}(f.name));
  std::string s = f.file;
  auto pick = [&](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
  switch (i % 7) {
    case 0: {  // truncation: first every offset near the start and the header's end, then any
      std::vector<size_t> at;
      for (size_t k = 0; k <= 24 && k < s.size(); k++) at.push_back(k);
      for (const Field& fd : f.fields) at.push_back(fd.offset + fd.width - 1);
      if (f.header_end) at.insert(at.end(), {f.header_end - 1, f.header_end, f.header_end + 1});
      at.insert(at.end(), {s.size() / 2, s.size() - 1});
      size_t n = i / 7 < at.size() ? at[i / 7] : pick(s.size());
      s.resize(std::min(n, s.size()));
      return {s, "truncated to " + std::to_string(s.size()) + " bytes"};
    }
    case 1: {  // bit flips
      std::string what = "bits flipped at";
      for (size_t k = 0, n = 1 + pick(4); k < n; k++) {
        size_t bit = pick(8 * s.size());
        s[bit / 8] = static_cast<char>(s[bit / 8] ^ (1 << (bit % 8)));
        what += " " + std::to_string(bit);
      }
      return {s, what};
    }
    case 2: {               // a huge (or tiny) count or length in a header field
      if (f.json_header) {  // the header length
        uint64_t v = rng() % 3 == 0 ? s.size() - 8 + pick(16) - 8 : kHuge[pick(std::size(kHuge))];
        s.replace(0, 8, le64(v));
        return {s, "header length " + std::to_string(v)};
      }
      if (f.fields.empty()) break;
      const Field& fd = f.fields[pick(f.fields.size())];
      uint64_t v = kHuge[pick(std::size(kHuge))];
      put(s, fd, v);
      return {s, "field at " + std::to_string(fd.offset) + " = " + std::to_string(v)};
    }
    case 3: {  // a number of the header (JSON) or of the lines (text) replaced
      size_t from = f.json_header ? 8 : 0, to = f.json_header ? f.header_end : s.size();
      auto runs = digit_runs(s, from, to);
      if (runs.empty()) break;
      auto [b, e] = runs[pick(runs.size())];
      std::string v = kHugeText[pick(std::size(kHugeText))];
      s.replace(b, e - b, v);
      if (f.json_header) s.replace(0, 8, le64(f.header_end - 8 + v.size() - (e - b)));  // still consistent
      return {s, "number at " + std::to_string(b) + " replaced by '" + v + "'"};
    }
    case 4: {  // random garbage over a range
      size_t b = pick(s.size()), n = 1 + pick(std::min<size_t>(64, s.size() - b));
      for (size_t k = b; k < b + n && k < s.size(); k++) s[k] = static_cast<char>(rng());
      return {s, "garbage over [" + std::to_string(b) + ", " + std::to_string(b + n) + ")"};
    }
    case 5: {  // bytes inserted or removed
      size_t at = pick(s.size() + 1), n = 1 + pick(16);
      if (rng() % 2) {
        std::string ins;
        for (size_t k = 0; k < n; k++) ins += static_cast<char>(rng());
        s.insert(at, ins);
        return {s, std::to_string(n) + " bytes inserted at " + std::to_string(at)};
      }
      s.erase(at, n);
      return {s, std::to_string(n) + " bytes removed at " + std::to_string(at)};
    }
    default: {  // one byte set to a value that means something in some format
      const char special[] = {'\0', '\xff', '"', '{', '}', '[', ']', ',', ':', '\n', '\\', '-', '9', '\x80'};
      size_t at = pick(s.size());
      if (s.empty()) break;
      s[at] = special[pick(sizeof special)];
      return {s,
              "byte " + std::to_string(at) + " set to " + std::to_string(static_cast<unsigned char>(s[at]))};
    }
  }
  return {s, "unchanged"};
}

class FileFuzz : public io_test::TempDirTest {
 protected:
  std::vector<Format> formats() {
    std::vector<Format> out;
    // safetensors: several dtypes and ranks, metadata
    std::string st = path("seed.safetensors");
    io::save_safetensors(st,
                         {{"w", tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})},
                          {"b", tensor(std::vector<int64_t>{7, 8}, {2})},
                          {"h", tensor(std::vector<float>{1, 2}, {2}).to(DType::BF16)},
                          {"m", tensor(std::vector<float>{1, 0, 1}, {3}).to(DType::Bool)}},
                         {{"format", "pt"}, {"note", "x\"y"}});
    std::string st_bytes = io_test::read_bytes(st);
    out.push_back({"safetensors",
                   st_bytes,
                   {},
                   8 + le(st_bytes, 0, 8),
                   true,
                   false,
                   [](const std::string& p, const std::string& bytes) {
                     return tensors_match(io::load_safetensors(p).tensors, {}, bytes);
                   }});
    // checkpoint
    std::string ck = path("seed.ckpt");
    io::Checkpoint c;
    c.model["w"] = tensor(std::vector<float>{1, 2, 3}, {3});
    c.optimizer["w.exp_avg"] = tensor(std::vector<float>{0.5f, 0.25f, 0}, {3});
    c.step = 42, c.rng_seed = 7, c.rng_offset = 1234, c.extra["epoch"] = "3";
    io::save_checkpoint(ck, c);
    std::string ck_bytes = io_test::read_bytes(ck);
    out.push_back({"checkpoint",
                   ck_bytes,
                   {},
                   8 + le(ck_bytes, 0, 8),
                   true,
                   false,
                   [](const std::string& p, const std::string& bytes) {
                     io::Checkpoint got = io::load_checkpoint(p);
                     return tensors_match(got.model, got.optimizer, bytes);
                   }});
    // llm.c token shard
    std::vector<uint16_t> toks;
    for (int k = 0; k < 40; k++) toks.push_back(static_cast<uint16_t>(k * 1237 % 50257));
    data::write_llmc_tokens(path("seed.bin"), toks);
    out.push_back({"llmc",
                   io_test::read_bytes(path("seed.bin")),
                   {{0, 4, false}, {4, 4, false}, {8, 4, false}, {12, 4, false}},
                   1024,
                   false,
                   false,
                   [](const std::string& p, const std::string& bytes) -> std::string {
                     std::vector<uint16_t> t = data::read_llmc_tokens(p, 50257);
                     if (1024 + 2 * t.size() != bytes.size()) return std::to_string(t.size()) + " tokens";
                     for (size_t k = 0; k < t.size(); k++)
                       if (t[k] != le(bytes, 1024 + 2 * k, 2) || t[k] >= 50257)
                         return "token " + std::to_string(k) + " is " + std::to_string(t[k]);
                     return "";
                   }});
    // MNIST idx: images (3 of 2x4) and labels
    std::string img = std::string("\0\0\x08\x03", 4) + std::string("\0\0\0\x03\0\0\0\x02\0\0\0\x04", 12);
    for (int k = 0; k < 24; k++) img += static_cast<char>(k * 10);
    out.push_back({"mnist-images",
                   img,
                   {{0, 4, true}, {4, 4, true}, {8, 4, true}, {12, 4, true}},
                   16,
                   false,
                   false,
                   [](const std::string& p, const std::string& bytes) {
                     return idx_matches(data::load_mnist_images(p), 3, bytes);
                   }});
    std::string lbl = std::string("\0\0\x08\x01\0\0\0\x05", 8) + std::string("\x07\x00\x09\x01\x02", 5);
    out.push_back({"mnist-labels",
                   lbl,
                   {{0, 4, true}, {4, 4, true}},
                   8,
                   false,
                   false,
                   [](const std::string& p, const std::string& bytes) {
                     return idx_matches(data::load_mnist_labels(p), 1, bytes);
                   }});
    // character tokenizer
    data::CharTokenizer::from_text("hello, wörld ✓\n").save(path("seed.vocab"));
    out.push_back({"tokenizer",
                   io_test::read_bytes(path("seed.vocab")),
                   {},
                   0,
                   false,
                   true,
                   [](const std::string& p, const std::string& bytes) -> std::string {
                     data::CharTokenizer t = data::CharTokenizer::load(p);
                     std::vector<int64_t> ids(static_cast<size_t>(t.vocab_size()));
                     for (size_t k = 0; k < ids.size(); k++) ids[k] = static_cast<int64_t>(k);
                     if (t.encode(t.decode(ids)) != ids) return "the vocabulary does not round-trip";
                     // every number as written (leading zeros aside), never wrapped
                     std::vector<std::string> lines = {""};
                     for (char ch : bytes) ch == '\n' ? lines.push_back("") : lines.back().push_back(ch);
                     auto same = [](std::string line, uint64_t v) {
                       line.erase(0, std::min(line.find_first_not_of('0'), line.size() - 1));
                       return line == std::to_string(v);
                     };
                     if (!same(lines.at(1), t.vocab().size())) return "vocabulary size " + lines[1];
                     for (size_t k = 0; k < t.vocab().size(); k++)
                       if (!same(lines.at(k + 2), t.vocab()[k])) return "entry " + lines[k + 2];
                     return "";
                   }});
    return out;
  }
};

TEST_F(FileFuzz, MutatedFilesLoadOrGiveAKilnError) {
  const uint64_t count = settings().fuzz_files > 0 ? settings().fuzz_files : 500;  // KILN_FUZZ_FILES
  for (const Format& f : formats()) {
    io_test::write_bytes(path("seed"), f.file);
    EXPECT_EQ(f.load(path("seed"), f.file), "");  // the unmutated file loads, and agrees with itself
    uint64_t loaded = 0, errors = 0, failures = 0;
    auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < count && failures < 10; i++) {
      auto [bytes, what] = mutate(f, i);
      std::string p = path("mutant");
      io_test::write_bytes(p, bytes);
      std::string problem;
      try {
        if (std::string wrong = f.load(p, bytes); !wrong.empty())
          problem = "loaded, but not what the file holds: " + wrong;
        loaded++;
      } catch (const Error&) {
        errors++;
      } catch (const std::exception& e) {
        problem = std::string("an exception other than kiln::Error: ") + e.what();
      } catch (...) {
        problem = "an exception not derived from std::exception";
      }
      std::filesystem::remove(p);  // a new file is quicker to write than truncating the old one
      if (!problem.empty()) {
        failures++;
        ADD_FAILURE() << f.name << " mutant " << i << " (" << what << "): " << problem;
      }
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s: %llu mutants, %llu loaded, %llu kiln::Error (%.2f s)\n", f.name.c_str(),
                static_cast<unsigned long long>(count), static_cast<unsigned long long>(loaded),
                static_cast<unsigned long long>(errors), seconds);
    EXPECT_GT(errors, 0u) << f.name << ": mutants that break the format must be rejected";
  }
}

}  // namespace
}  // namespace kiln
