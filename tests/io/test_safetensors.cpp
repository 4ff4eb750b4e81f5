// kiln::io safetensors: round trips of every dtype (bit-exact), views, metadata, hand-built files,
// rejection of corrupt files, atomic writes, and loading into existing tensors.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "helpers.h"
#include "io/io_test_util.h"

namespace kiln {
namespace {

using io_test::error_of;
using io_test::read_bytes;
using io_test::tensor_bytes;
using io_test::write_bytes;

class IOSafetensors : public io_test::TempDirTest {};

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int k = 0; k < 8; k++) s[k] = static_cast<char>(v >> (8 * k));
  return s;
}

// A file as the format says: header length, the header (space-padded to 8 bytes if asked), data.
std::string st_file(std::string header, const std::string& data, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  return le64(header.size()) + header + data;
}

template <class T>
std::string raw(std::initializer_list<T> vals) {
  std::string s;
  for (T v : vals) s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return s;
}

const std::vector<DType> kAllDTypes = {DType::F32, DType::F64, DType::F16, DType::BF16,
                                       DType::I8,  DType::I16, DType::I32, DType::I64,
                                       DType::U8,  DType::U32, DType::U64, DType::Bool};

TEST_F(IOSafetensors, RoundTripEveryDTypeBitExact) {
  std::map<std::string, Tensor> ts;
  for (size_t k = 0; k < kAllDTypes.size(); k++) {
    DType t = kAllDTypes[k];
    ts["t_" + to_string(t)] = testing::random_tensor({3, 5}, t, -100, 100, 10 + k);
  }
  // f16 / bf16 special values by bit pattern: NaN payloads, infinities, -0, subnormals, max
  std::vector<uint16_t> bits = {0x7e01, 0xfc00, 0x7c00, 0x8000, 0x0001,
                                0x03ff, 0x7bff, 0x3c00, 0x7fc1, 0xff80};
  ts["half_bits"] = from_buffer(bits.data(), {10}, DType::F16);
  ts["bf16_bits"] = from_buffer(bits.data(), {2, 5}, DType::BF16);
  std::vector<double> dspecial = {NAN, -INFINITY, -0.0, 5e-324, 1.7976931348623157e308};
  ts["f64_special"] = tensor(dspecial);
  std::string p = path("all.safetensors");
  io::save_safetensors(p, ts, {{"format", "pt"}});
  io::SafetensorsFile f = io::load_safetensors(p);
  ASSERT_EQ(f.tensors.size(), ts.size());
  for (auto& [name, t] : ts) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(f.tensors.count(name));
    const Tensor& got = f.tensors.at(name);
    EXPECT_EQ(got.dtype(), t.dtype());
    EXPECT_EQ(got.shape(), t.shape());
    EXPECT_EQ(tensor_bytes(got), tensor_bytes(t));
  }
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  // the loaded tensors compute like any other
  testing::expect_values(f.tensors.at("t_i32").sum() - ts.at("t_i32").sum(), {0});
}

TEST_F(IOSafetensors, ZeroDimAndEmptyTensors) {
  std::map<std::string, Tensor> ts = {{"scalar", full({}, 3.5, DType::F64)},
                                      {"empty", zeros({0, 4})},
                                      {"empty_mid", zeros({2, 0, 3}, {.dtype = DType::I32})},
                                      {"one", full({1}, 7, DType::I64)}};
  std::string p = path("z.safetensors");
  io::save_safetensors(p, ts);
  auto f = io::load_safetensors(p);
  EXPECT_EQ(f.tensors.at("scalar").shape(), Shape{});
  EXPECT_EQ(f.tensors.at("scalar").item<double>(), 3.5);
  EXPECT_EQ(f.tensors.at("empty").shape(), (Shape{0, 4}));
  EXPECT_EQ(f.tensors.at("empty_mid").shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(f.tensors.at("empty_mid").dtype(), DType::I32);
  EXPECT_EQ(f.tensors.at("one").item<int64_t>(), 7);
  EXPECT_TRUE(f.metadata.empty());
  // only empty tensors, and no tensors at all
  io::save_safetensors(p, {{"e", zeros({0})}});
  EXPECT_EQ(io::load_safetensors(p).tensors.at("e").numel(), 0);
  io::save_safetensors(p, {});
  EXPECT_TRUE(io::load_safetensors(p).tensors.empty());
}

TEST_F(IOSafetensors, ViewsAreSavedAsTheirRowMajorValues) {
  Tensor base = arange(24).reshape({2, 3, 4});
  std::map<std::string, Tensor> ts = {
      {"permuted", base.permute({2, 0, 1})},
      {"strided", base.slice(2, 0, 4, 2)},
      {"expanded", tensor({1.f, 2.f}).reshape({2, 1}).expand({2, 3})},
      {"flipped", base.to(DType::F16).flip({1})},
      {"computed", base.to(DType::F32) * 0.5f + 1},
  };
  std::string p = path("v.safetensors");
  io::save_safetensors(p, ts);
  auto f = io::load_safetensors(p);
  for (auto& [name, t] : ts) {
    SCOPED_TRACE(name);
    EXPECT_EQ(f.tensors.at(name).shape(), t.shape());
    EXPECT_EQ(f.tensors.at(name).to_vector<double>(), t.to_vector<double>());
  }
  EXPECT_EQ(f.tensors.at("permuted").to_vector<int64_t>()[1], 4);  // element (0, 0, 1) = base[0, 1, 0]
}

TEST_F(IOSafetensors, TensorsRequiringGradAreSaved) {
  Tensor w = tensor({1.f, 2.f, 3.f});
  w.requires_grad_();
  Tensor y = w * 2;  // realized but keeps its graph for autograd
  std::string p = path("g.safetensors");
  io::save_safetensors(p, {{"w", w}, {"y", y}});
  auto f = io::load_safetensors(p);
  EXPECT_EQ(f.tensors.at("y").to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_FALSE(f.tensors.at("w").requires_grad());
  y.sum().backward();  // the graph still differentiates
  testing::expect_values(w.grad(), {2, 2, 2});
}

TEST_F(IOSafetensors, MetadataRoundTripWithEscapesAndUnicode) {
  std::map<std::string, std::string> meta = {
      {"quote\"back\\slash", "line\nbreak\ttab\x01"}, {"π", "ünïcödé 😀"}, {"empty", ""}, {"/", "</script>"}};
  std::string p = path("m.safetensors");
  io::save_safetensors(p, {{"x", ones({2})}}, meta);
  EXPECT_EQ(io::load_safetensors(p).metadata, meta);
  EXPECT_NE(error_of([&] {
              io::save_safetensors(p, {}, {{"bad", std::string("\xff\xfe")}});
            }).find("not valid UTF-8"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              io::save_safetensors(p, {{"__metadata__", ones({1})}});
            }).find("cannot be a tensor name"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              io::save_safetensors(p, {{"u", Tensor()}});
            }).find("undefined"),
            std::string::npos);
}

TEST_F(IOSafetensors, WrittenFileFollowsTheFormat) {
  std::string p = path("f.safetensors");
  io::save_safetensors(p, {{"b", tensor({1.f, 2.f})}, {"a", full({}, int64_t{-3}, DType::I64)}},
                       {{"k", "v"}});
  std::string bytes = read_bytes(p);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int k = 0; k < 8; k++) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[k])) << (8 * k);
  EXPECT_EQ((8 + n) % 8, 0u);  // data starts 8-byte aligned
  ASSERT_EQ(bytes.size(), 8 + n + 8 + 8);
  std::string header = bytes.substr(8, n);
  EXPECT_EQ(header[0], '{');
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
            "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}");
  EXPECT_EQ(bytes.substr(8 + n), raw<int64_t>({-3}) + raw<float>({1.f, 2.f}));
}

TEST_F(IOSafetensors, HandBuiltFileLoads) {
  // written by hand from the spec: padded header, tensors in any order of the header, metadata last
  std::string header =
      "{\"b\": {\"dtype\": \"I16\", \"shape\": [], \"data_offsets\": [8, 10]},\n"
      " \"a\": {\"shape\": [2, 1], \"dtype\": \"F32\", \"data_offsets\": [0, 8]},"
      " \"c\": {\"dtype\": \"BOOL\", \"shape\": [3], \"data_offsets\": [10, 13]},"
      " \"e\": {\"dtype\": \"BF16\", \"shape\": [0], \"data_offsets\": [13, 13]},"
      " \"__metadata__\": {\"name\": \"caf\\u00e9 \\ud83d\\ude00\"}}";
  std::string data = raw<float>({1.5f, -2.f}) + raw<int16_t>({-3}) + std::string("\x01\x00\x01", 3);
  std::string p = path("hand.safetensors");
  for (bool pad : {true, false}) {
    write_bytes(p, st_file(header, data, pad));
    auto f = io::load_safetensors(p);
    ASSERT_EQ(f.tensors.size(), 4u);
    EXPECT_EQ(f.tensors.at("a").shape(), (Shape{2, 1}));
    EXPECT_EQ(f.tensors.at("a").to_vector<float>(), (std::vector<float>{1.5f, -2.f}));
    EXPECT_EQ(f.tensors.at("b").dtype(), DType::I16);
    EXPECT_EQ(f.tensors.at("b").item<int64_t>(), -3);
    EXPECT_EQ(f.tensors.at("c").to_vector<bool>(), (std::vector<bool>{true, false, true}));
    EXPECT_EQ(f.tensors.at("e").dtype(), DType::BF16);
    EXPECT_EQ(f.metadata.at("name"), "café 😀");
  }
}

TEST_F(IOSafetensors, HeaderOfManyTensorsLoads) {
  // 100k tensors: the JSON reader checks keys for duplicates in n log n time (this took a minute
  // when each key was compared with all before it)
  const int n = 100000;
  std::string header = "{", data;
  for (int i = 0; i < n; i++) {
    header += (i ? ",\"t" : "\"t") + std::to_string(i) +
              "\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[" + std::to_string(4 * i) + "," +
              std::to_string(4 * i + 4) + "]}";
    data += raw<int32_t>({i * 7});
  }
  write_bytes(path("many.safetensors"), st_file(header + "}", data));
  io::SafetensorsFile f = io::load_safetensors(path("many.safetensors"));
  ASSERT_EQ(f.tensors.size(), static_cast<size_t>(n));
  EXPECT_EQ(f.tensors.at("t0").to_vector<int32_t>(), std::vector<int32_t>{0});
  EXPECT_EQ(f.tensors.at("t99999").to_vector<int32_t>(), std::vector<int32_t>{99999 * 7});
  // a duplicate among them is still found
  std::string dup = header + ",\"t5\":{\"dtype\":\"I32\",\"shape\":[0],\"data_offsets\":[0,0]}}";
  write_bytes(path("dup.safetensors"), st_file(dup, data));
  EXPECT_NE(error_of([&] { io::load_safetensors(path("dup.safetensors")); }).find("duplicate key \"t5\""),
            std::string::npos);
}

TEST_F(IOSafetensors, CorruptFilesAreRejected) {
  std::string p = path("bad.safetensors");
  std::string good_header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  std::string good = st_file(good_header, raw<float>({1, 2}));
  auto expect_rejected = [&](const std::string& bytes, const std::string& msg) {
    SCOPED_TRACE(msg);
    write_bytes(p, bytes);
    std::string e = error_of([&] { io::load_safetensors(p); });
    EXPECT_NE(e.find(msg), std::string::npos) << e;
    EXPECT_NE(e.find(p), std::string::npos) << e;  // names the file
  };
  // truncated at several points
  expect_rejected("", "file too short");
  expect_rejected(good.substr(0, 5), "file too short");
  expect_rejected(good.substr(0, 8), "header length");
  expect_rejected(good.substr(0, 20), "header length");
  expect_rejected(good.substr(0, good.size() - 1), "out of range");
  expect_rejected(good.substr(0, good.size() - 8), "out of range");
  // header length far beyond the file (and one that would overflow 8 + n)
  expect_rejected(le64(1ull << 40) + good.substr(8), "header length 1099511627776 is beyond the file size");
  expect_rejected(le64(~0ull) + good.substr(8), "beyond the file size");
  // invalid JSON
  for (std::string h :
       {"{\"a\":", "not json", "{\"a\":{\"dtype\":\"F32\",}}", "{} {}", "{\"a\" 1}", "\xff",
        "{\"\xc3\x28\":1}", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]"})
    expect_rejected(st_file(h, ""), "invalid JSON header");
  expect_rejected(st_file("{\"a\":1,\"a\":2}", ""), "duplicate key");
  expect_rejected(st_file("[1, 2]", ""), "must be a JSON object");
  expect_rejected(st_file("{\"__metadata__\":{\"k\":1}}", ""), "not a string");
  // bad dtypes and entries
  for (std::string dt : {"F8_E4M3", "U16", "f32", "FLOAT"})
    expect_rejected(st_file("{\"a\":{\"dtype\":\"" + dt + "\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                            raw<float>({1, 2})),
                    "unknown dtype '" + dt + "'");
  expect_rejected(st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", raw<float>({1, 2})),
                  "needs \"dtype\"");
  expect_rejected(
      st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", raw<float>({1, 2})),
      "nonnegative integers");
  expect_rejected(
      st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", raw<float>({1, 2})),
      "nonnegative integers");
  // shape / offsets disagree with the dtype size
  expect_rejected(
      st_file("{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}", raw<float>({1, 2})),
      "span 8 bytes, but shape (2,) of F64 needs 16");
  expect_rejected(
      st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}",
              raw<float>({1, 2})),
      "shape (4294967296, 4294967296): its dimensions multiply past 2^63");
  expect_rejected(
      st_file("{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}",
              raw<float>({1, 2})),
      "of F64 needs more than 2^64");
  expect_rejected(
      st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,8]}}",
              raw<float>({1, 2})),
      "shape entries must be nonnegative integers");
  // zero-element tensors may have huge other dimensions
  write_bytes(
      p, st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,9223372036854775807],\"data_offsets\":[0,0]}}", ""));
  EXPECT_EQ(io::load_safetensors(p).tensors.at("a").numel(), 0);
  // but not ones whose other dimensions multiply past int64 (strides would overflow)
  expect_rejected(
      st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,4],\"data_offsets\":[0,0]}}", ""),
      "its dimensions multiply past 2^63");
  expect_rejected(
      st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", raw<float>({1, 2})),
      "begin after end");
  // overlapping, out of range, gaps, trailing bytes
  expect_rejected(st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                          raw<float>({1, 2})),
                  "overlapping");
  expect_rejected(st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                          raw<float>({1, 2})),
                  "overlapping");
  expect_rejected(
      st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", raw<float>({1, 2})),
      "out of range");
  expect_rejected(st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[18446744073709551608,"
                          "18446744073709551616]}}",
                          raw<float>({1, 2})),
                  "data_offsets must be");
  expect_rejected(
      st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", raw<float>({1, 2})),
      "data not covering the buffer: bytes [0, 4)");
  expect_rejected(good + "xyz",
                  "data not covering the buffer: the data section has 11 bytes, the tensors cover 8");
  // a file that does not exist
  EXPECT_NE(error_of([&] { io::load_safetensors(path("missing.safetensors")); }).find("cannot open"),
            std::string::npos);
  // and the good one loads
  write_bytes(p, good);
  EXPECT_EQ(io::load_safetensors(p).tensors.at("a").to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST_F(IOSafetensors, ExistingFileIsReplacedOnlyOnSuccess) {
  std::string p = path("w.safetensors");
  io::save_safetensors(p, {{"x", tensor({1.f})}});
  std::string before = read_bytes(p);
  // failures before writing: the old file stays
  EXPECT_NE(error_of([&] { io::save_safetensors(p, {{"u", Tensor()}}); }), "no error");
  EXPECT_EQ(read_bytes(p), before);
  // a failure in the middle of writing (file size limit): the old file stays, no temporary is left
  Tensor big = ones({1 << 18});
  big.realize();
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  rlimit old_limit{};
  getrlimit(RLIMIT_FSIZE, &old_limit);
  rlimit lim = old_limit;
  lim.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  std::string e = error_of([&] { io::save_safetensors(p, {{"big", big}}); });
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  EXPECT_NE(e.find("cannot write " + p + ": write failed"), std::string::npos) << e;
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_EQ(files(), std::vector<std::string>{"w.safetensors"});
  // success replaces it
  io::save_safetensors(p, {{"big", big}});
  EXPECT_EQ(io::load_safetensors(p).tensors.at("big").numel(), 1 << 18);
  EXPECT_EQ(files(), std::vector<std::string>{"w.safetensors"});
}

TEST_F(IOSafetensors, UnwritableDirectoryFailsAndLeavesNoTemporaryFiles) {
  // a directory that does not exist, and a "directory" that is a file: no file is created anywhere
  EXPECT_NE(error_of([&] {
              io::save_safetensors(path("no/such/dir/x.safetensors"), {{"x", ones({2})}});
            }).find("cannot create a temporary file"),
            std::string::npos);
  write_bytes(path("file"), "x");
  EXPECT_NE(error_of([&] {
              io::save_safetensors(path("file/x.safetensors"), {{"x", ones({2})}});
            }).find("cannot write " + path("file/x.safetensors")),
            std::string::npos);
  EXPECT_EQ(files(), std::vector<std::string>{"file"});
  // a read-only directory; root ignores directory permissions, so then the check runs in a child
  // process that drops to user "nobody" (the tensor is realized first: the child runs no kernels)
  std::string ro = path("ro");
  std::filesystem::create_directory(ro);
  std::filesystem::permissions(ro, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec |
                                       std::filesystem::perms::others_read |
                                       std::filesystem::perms::others_exec);
  std::filesystem::permissions(dir_,
                               std::filesystem::perms::others_read | std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  Tensor x = ones({2});
  x.realize();
  auto check = [&] {
    std::string e = error_of([&] { io::save_safetensors(ro + "/x.safetensors", {{"x", x}}); });
    bool ok =
        e.find("cannot write " + ro + "/x.safetensors: cannot create a temporary file") != std::string::npos;
    return ok && std::filesystem::is_empty(ro);
  };
  if (geteuid() != 0) {
    EXPECT_TRUE(check());
  } else {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
      _exit(check() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: wrong error or files left behind, 2: cannot drop privileges";
  }
  EXPECT_TRUE(std::filesystem::is_empty(ro));
}

TEST_F(IOSafetensors, LoadIntoExistingTensors) {
  std::string p = path("sd.safetensors");
  Tensor w_saved = testing::random_tensor({3, 4}, DType::F32, -1, 1, 5);
  Tensor b_saved = testing::random_tensor({4}, DType::BF16, -1, 1, 6);
  io::save_safetensors(p, {{"w", w_saved}, {"b", b_saved}});

  Tensor w = zeros({3, 4}), b = zeros({4}, {.dtype = DType::BF16});
  w.requires_grad_();
  Tensor w_alias = w;
  std::map<std::string, Tensor> targets = {{"w", w}, {"b", b}};
  io::LoadReport r = io::load_safetensors_into(p, targets);
  EXPECT_TRUE(r.missing.empty() && r.unexpected.empty());
  EXPECT_EQ(tensor_bytes(w_alias), tensor_bytes(w_saved));  // the handles outside the map see it
  EXPECT_EQ(tensor_bytes(b), tensor_bytes(b_saved));
  EXPECT_TRUE(w.is_leaf() && w.requires_grad());

  // strict: missing and unexpected names are errors, and nothing is assigned
  Tensor w2 = zeros({3, 4}), c2 = zeros({2});
  std::map<std::string, Tensor> other = {{"w", w2}, {"c", c2}};
  std::string e = error_of([&] { io::load_safetensors_into(p, other, true); });
  EXPECT_NE(e.find("missing from the file: 'c'"), std::string::npos) << e;
  EXPECT_NE(e.find("unexpected in the file: 'b'"), std::string::npos) << e;
  testing::expect_values(w2.sum(), {0});
  // not strict: reported, the matching ones assigned
  r = io::load_safetensors_into(p, other, false);
  EXPECT_EQ(r.missing, std::vector<std::string>{"c"});
  EXPECT_EQ(r.unexpected, std::vector<std::string>{"b"});
  EXPECT_EQ(tensor_bytes(w2), tensor_bytes(w_saved));
  testing::expect_values(c2, {0, 0});
  // shape or dtype mismatches are errors either way
  Tensor w3 = zeros({4, 3}), b3 = zeros({4});
  std::map<std::string, Tensor> mism = {{"w", w3}, {"b", b3}};
  e = error_of([&] { io::load_safetensors_into(p, mism, false); });
  EXPECT_NE(
      e.find("mismatched: 'b' (file (4,) bf16, target (4,) f32), 'w' (file (3, 4) f32, target (4, 3) f32)"),
      std::string::npos)
      << e;
  testing::expect_values(w3.sum(), {0});
}

}  // namespace
}  // namespace kiln
