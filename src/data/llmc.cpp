// data: llm.c token shards (a 256-int32 header, then uint16 tokens): read, load, write.
#include <cstring>

#include "data/io.h"
#include "kiln/data.h"

namespace kiln::data {

namespace {
constexpr int32_t kMagic = 20240520, kVersion = 1;
constexpr size_t kHeaderBytes = 256 * 4;
int32_t le32(const uint8_t* p) {
  return static_cast<int32_t>(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                              static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24);
}
void put_le32(uint8_t* p, int32_t v) {
  for (int k = 0; k < 4; k++) p[k] = static_cast<uint8_t>(static_cast<uint32_t>(v) >> (8 * k));
}
}  // namespace

std::vector<uint16_t> read_llmc_tokens(const std::string& path, int64_t vocab_size) {
  const std::string what = "data::read_llmc_tokens";
  auto bytes = io::read_file(what, path);
  auto bad = [&](const std::string& msg) { return Error("kiln: " + what + ": \"" + path + "\": " + msg); };
  if (bytes.size() < kHeaderBytes)
    throw bad("file has " + std::to_string(bytes.size()) + " bytes, shorter than the 1024-byte header");
  int32_t magic = le32(&bytes[0]), version = le32(&bytes[4]), count = le32(&bytes[8]);
  if (magic != kMagic)
    throw bad("bad magic number " + std::to_string(magic) + " (expected " + std::to_string(kMagic) +
              "): not an llm.c token file");
  if (version != kVersion)
    throw bad("unsupported version " + std::to_string(version) + " (expected " + std::to_string(kVersion) +
              ")");
  if (count < 0) throw bad("negative token count " + std::to_string(count));
  size_t want = kHeaderBytes + 2 * static_cast<size_t>(count), have = bytes.size();
  if (have < want)
    throw bad("truncated: header says " + std::to_string(count) + " tokens (" + std::to_string(want) +
              " bytes with the header) but the file has " + std::to_string(have) + " bytes");
  if (have > want)
    throw bad("header says " + std::to_string(count) + " tokens (" + std::to_string(want) +
              " bytes with the header) but the file has " + std::to_string(have) + " bytes");
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  for (size_t k = 0; k < tokens.size(); k++) {
    const uint8_t* p = &bytes[kHeaderBytes + 2 * k];
    tokens[k] = static_cast<uint16_t>(p[0] | p[1] << 8);
    if (vocab_size > 0 && tokens[k] >= vocab_size)
      throw bad("token " + std::to_string(k) + " is " + std::to_string(tokens[k]) +
                ", outside the vocabulary of " + std::to_string(vocab_size));
  }
  return tokens;
}

Tensor load_llmc_tokens(const std::string& path, DType dtype, int64_t vocab_size) {
  if (dtype != DType::I64 && dtype != DType::I32)
    throw Error("kiln: data::load_llmc_tokens: dtype must be i64 or i32, got " + to_string(dtype));
  auto tokens = read_llmc_tokens(path, vocab_size);
  Shape s = {static_cast<int64_t>(tokens.size())};
  if (dtype == DType::I32)
    return HostTensor::of(std::vector<int32_t>(tokens.begin(), tokens.end()), s, dtype).to_tensor();
  return HostTensor::of(std::vector<int64_t>(tokens.begin(), tokens.end()), s, dtype).to_tensor();
}

void write_llmc_tokens(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    throw Error("kiln: data::write_llmc_tokens: " + std::to_string(tokens.size()) +
                " tokens do not fit the header");
  std::vector<uint8_t> bytes(kHeaderBytes + 2 * tokens.size(), 0);
  put_le32(&bytes[0], kMagic);
  put_le32(&bytes[4], kVersion);
  put_le32(&bytes[8], static_cast<int32_t>(tokens.size()));
  for (size_t k = 0; k < tokens.size(); k++) {
    bytes[kHeaderBytes + 2 * k] = static_cast<uint8_t>(tokens[k] & 0xff);
    bytes[kHeaderBytes + 2 * k + 1] = static_cast<uint8_t>(tokens[k] >> 8);
  }
  io::write_file("data::write_llmc_tokens", path, bytes.data(), bytes.size());
}

}  // namespace kiln::data
