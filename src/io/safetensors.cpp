// safetensors files: an 8-byte little-endian header length, a JSON header (dtype, shape and
// data_offsets per tensor, optional __metadata__), then the tensors' little-endian bytes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <vector>

#include "io/json.h"
#include "ir/node.h"
#include "kiln/io.h"
#include "runtime/atomic_file.h"
#include "runtime/buffer.h"

namespace kiln::io {

namespace {

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypes[] = {{DType::F32, "F32"},   {DType::F64, "F64"}, {DType::F16, "F16"},
                                 {DType::BF16, "BF16"}, {DType::I8, "I8"},   {DType::I16, "I16"},
                                 {DType::I32, "I32"},   {DType::I64, "I64"}, {DType::U8, "U8"},
                                 {DType::U32, "U32"},   {DType::U64, "U64"}, {DType::Bool, "BOOL"}};

const char* st_name(DType t) {
  for (auto& d : kDTypes)
    if (d.dtype == t) return d.name;
  return nullptr;
}

[[noreturn]] void bad(const std::string& path, const std::string& problem) {
  throw Error("kiln::io: " + path + ": " + problem);
}

// Reverses the bytes of each element (for big-endian hosts; the file is little-endian).
void swap_elements(char* p, size_t nbytes, int size) {
  if (size == 1) return;
  for (size_t k = 0; k < nbytes; k += static_cast<size_t>(size)) std::reverse(p + k, p + k + size);
}

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// Parses and validates the header; `data_len` is the size of the data section.
std::vector<Entry> parse_header(const std::string& path, std::string_view header, uint64_t data_len,
                                std::map<std::string, std::string>& metadata) {
  json::Value root;
  try {
    root = json::parse(header);
  } catch (const std::exception& e) {
    bad(path, std::string("invalid JSON header: ") + e.what());
  }
  if (root.kind != json::Value::Kind::Object)
    bad(path, std::string("the header must be a JSON object, got ") + json::Value::kind_name(root.kind));
  std::vector<Entry> entries;
  for (auto& [name, v] : root.members) {
    if (name == "__metadata__") {
      if (v.kind != json::Value::Kind::Object) bad(path, "__metadata__ must be an object of strings");
      for (auto& [k, s] : v.members) {
        if (s.kind != json::Value::Kind::String)
          bad(path, "__metadata__ value of " + in_quotes(k) + " is " + json::Value::kind_name(s.kind) +
                        ", not a string");
        metadata[k] = s.text;
      }
      continue;
    }
    std::string what = "tensor " + in_quotes(name) + ": ";
    if (v.kind != json::Value::Kind::Object) bad(path, what + "entry must be an object");
    const json::Value* dt = v.find("dtype");
    const json::Value* sh = v.find("shape");
    const json::Value* off = v.find("data_offsets");
    if (!dt || !sh || !off) bad(path, what + "entry needs \"dtype\", \"shape\" and \"data_offsets\"");
    if (dt->kind != json::Value::Kind::String) bad(path, what + "dtype must be a string");
    Entry e{name, DType::F32, {}, 0, 0};
    bool known = false;
    for (auto& d : kDTypes)
      if (dt->text == d.name) e.dtype = d.dtype, known = true;
    if (!known) bad(path, what + "unknown dtype " + in_quotes(dt->text));
    if (sh->kind != json::Value::Kind::Array) bad(path, what + "shape must be an array");
    // the product of the nonzero dims must fit int64 even when a zero dim makes the tensor empty:
    // strides and views are computed from it
    uint64_t numel = 1;
    bool overflow = false, has_zero = false;
    for (auto& d : sh->items) {
      auto n = d.as_u64();
      if (!n || *n > static_cast<uint64_t>(INT64_MAX))
        bad(path, what + "shape entries must be nonnegative integers");
      e.shape.push_back(static_cast<int64_t>(*n));
      has_zero |= *n == 0;
      if (*n != 0 && numel > static_cast<uint64_t>(INT64_MAX) / *n) overflow = true;
      if (*n != 0) numel *= *n;
    }
    if (overflow) bad(path, what + "shape " + shape_str(e.shape) + ": its dimensions multiply past 2^63");
    if (has_zero) numel = 0;
    if (off->kind != json::Value::Kind::Array || off->items.size() != 2 || !off->items[0].as_u64() ||
        !off->items[1].as_u64())
      bad(path, what + "data_offsets must be [begin, end] with nonnegative integers");
    e.begin = *off->items[0].as_u64(), e.end = *off->items[1].as_u64();
    std::string offs = "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.begin > e.end) bad(path, what + offs + " has begin after end");
    auto size = static_cast<uint64_t>(dtype_size(e.dtype));
    if (numel > UINT64_MAX / size || e.end - e.begin != numel * size)
      bad(path,
          what + offs + " span " + std::to_string(e.end - e.begin) + " bytes, but shape " +
              shape_str(e.shape) + " of " + dt->text + " needs " +
              (numel > UINT64_MAX / size ? std::string("more than 2^64") : std::to_string(numel * size)));
    if (e.end > data_len)
      bad(path, what + offs + " out of range: the data section has " + std::to_string(data_len) + " bytes");
    entries.push_back(std::move(e));
  }
  // the tensors must tile the data section: no overlaps, no gaps, nothing after the last one
  std::vector<const Entry*> order;
  for (auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : order) {
    if (e->begin < covered)
      bad(path, "tensors " + in_quotes(prev->name) + " and " + in_quotes(e->name) +
                    " have overlapping data_offsets");
    if (e->begin > covered)
      bad(path, "data not covering the buffer: bytes [" + std::to_string(covered) + ", " +
                    std::to_string(e->begin) + ") of the data section belong to no tensor");
    covered = e->end, prev = e;
  }
  if (covered != data_len)
    bad(path, "data not covering the buffer: the data section has " + std::to_string(data_len) +
                  " bytes, the tensors cover " + std::to_string(covered));
  return entries;
}

class InFile {
 public:
  InFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) bad(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st;
    std::string problem = ::fstat(fd_, &st) != 0 ? std::string("cannot stat: ") + std::strerror(errno)
                          : S_ISDIR(st.st_mode)  ? "is a directory, not a file"
                                                 : "";
    if (!problem.empty()) {
      ::close(fd_);  // the destructor of an unconstructed object does not run
      bad(path, problem);
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~InFile() { ::close(fd_); }
  InFile(const InFile&) = delete;
  InFile& operator=(const InFile&) = delete;
  uint64_t size() const { return size_; }
  void read(void* dst, size_t n, uint64_t at) {
    auto p = static_cast<char*>(dst);
    while (n > 0) {
      ssize_t k = ::pread(fd_, p, n, static_cast<off_t>(at));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) bad(path_, std::string("read failed: ") + std::strerror(errno));
      if (k == 0) bad(path_, "file shrank while being read");
      p += k, n -= static_cast<size_t>(k), at += static_cast<uint64_t>(k);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<Tensor> ts;
  for (auto& [name, t] : tensors) {
    if (!t.defined()) bad(path, "cannot save tensor " + in_quotes(name) + ": it is undefined");
    if (name == "__metadata__") bad(path, "\"__metadata__\" cannot be a tensor name");
    if (!json::valid_utf8(name)) bad(path, "tensor name " + in_quotes(name) + " is not valid UTF-8");
    if (!st_name(t.dtype()))
      bad(path, "tensor " + in_quotes(name) + ": dtype " + to_string(t.dtype()) + " has no safetensors name");
    ts.push_back(t);
  }
  realize(ts);  // one schedule for all; views become their row-major values
  // larger elements first, so every tensor starts aligned to its element size (the header is padded)
  std::vector<std::pair<std::string, Tensor>> order(tensors.begin(), tensors.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return dtype_size(a.second.dtype()) > dtype_size(b.second.dtype());
  });
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (auto& [k, v] : metadata) {
      if (!first) header += ',';
      first = false;
      if (!json::append_string(header, k)) bad(path, "metadata key " + in_quotes(k) + " is not valid UTF-8");
      header += ':';
      if (!json::append_string(header, v))
        bad(path, "metadata value of " + in_quotes(k) + " is not valid UTF-8");
    }
    header += '}';
  }
  uint64_t at = 0;
  for (auto& [name, t] : order) {
    if (header.size() > 1) header += ',';
    json::append_string(header, name);
    header += ":{\"dtype\":\"";
    header += st_name(t.dtype());
    header += "\",\"shape\":[";
    for (size_t d = 0; d < t.shape().size(); d++) header += (d ? "," : "") + std::to_string(t.shape()[d]);
    uint64_t n = t.node()->buffer->nbytes();
    header += "],\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + n) + "]}";
    at += n;
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  unsigned char len[8];
  for (int k = 0; k < 8; k++)
    len[k] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * k));

  runtime::AtomicFile f(path);
  f.write(len, 8);
  f.write(header.data(), header.size());
  std::vector<char> scratch;
  for (auto& [name, t] : order) {
    std::shared_ptr<const Buffer> hb = on_host(t.node()->buffer);
    const Buffer& b = *hb;
    if (b.nbytes() == 0) continue;
    if constexpr (std::endian::native == std::endian::little) {
      f.write(b.data, b.nbytes());
    } else {
      scratch.assign(static_cast<const char*>(b.data), static_cast<const char*>(b.data) + b.nbytes());
      swap_elements(scratch.data(), scratch.size(), dtype_size(b.dtype));
      f.write(scratch.data(), scratch.size());
    }
  }
  f.commit();
}

SafetensorsFile load_safetensors(const std::string& path) {
  InFile f(path);
  if (f.size() < 8)
    bad(path, "file too short: " + std::to_string(f.size()) + " bytes, the header length alone needs 8");
  unsigned char len[8];
  f.read(len, 8, 0);
  uint64_t n = 0;
  for (int k = 0; k < 8; k++) n |= static_cast<uint64_t>(len[k]) << (8 * k);
  if (n > f.size() - 8)
    bad(path, "header length " + std::to_string(n) + " is beyond the file size (" + std::to_string(f.size()) +
                  " bytes)");
  std::string header(static_cast<size_t>(n), '\0');
  f.read(header.data(), header.size(), 8);
  SafetensorsFile out;
  std::vector<Entry> entries = parse_header(path, header, f.size() - 8 - n, out.metadata);
  std::vector<char> scratch;
  for (auto& e : entries) {
    scratch.resize(static_cast<size_t>(e.end - e.begin));
    f.read(scratch.data(), scratch.size(), 8 + n + e.begin);
    if constexpr (std::endian::native != std::endian::little)
      swap_elements(scratch.data(), scratch.size(), dtype_size(e.dtype));
    if (e.dtype == DType::Bool)  // bytes other than 0 and 1 would break kernels reading bools
      for (char& c : scratch) c = c != 0;
    out.tensors[e.name] = from_buffer(scratch.data(), e.shape, e.dtype);
  }
  return out;
}

}  // namespace kiln::io
