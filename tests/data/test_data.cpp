// kiln::data: DataLoader order, shapes, drop_last and prefetch; llm.c, MNIST and tokenizer readers on
// small files written to a temp dir, including corrupt and truncated ones.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "helpers.h"

using namespace kiln;
using namespace kiln::data;
namespace fs = std::filesystem;

namespace {
template <class F>
void expect_error(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected a kiln::Error containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::path(::testing::TempDir()) / ("kiln_data_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};
void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}
// x: (n, 2) f64 with rows (i, 10 i); y: (n,) i64 = i
TensorDataset numbered(int64_t n) {
  std::vector<double> x;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; i++) x.push_back(static_cast<double>(i)), x.push_back(10.0 * i), y.push_back(i);
  return TensorDataset({tensor(x, {n, 2}), tensor(y, {n})});
}
// The labels of every batch of one epoch, in order.
std::vector<std::vector<int64_t>> epoch_labels(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (const Example& b : loader) out.push_back(b[1].to_vector<int64_t>());
  return out;
}
std::vector<uint8_t> be32(uint32_t v) {
  return {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 8),
          static_cast<uint8_t>(v)};
}
}  // namespace

TEST(DataTensorDataset, RowsAndErrors) {
  auto ds = numbered(5);
  EXPECT_EQ(ds.size(), 5);
  Example e = ds.get(3);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].shape(), (Shape{2}));
  EXPECT_EQ(e[0].to_vector<double>(), (std::vector<double>{3, 30}));
  EXPECT_EQ(e[1].dim(), 0);
  EXPECT_EQ(e[1].item<int64_t>(), 3);
  // a lazy, non-contiguous input is realized and copied
  TensorDataset t({arange(6).reshape({2, 3}).t() * 2});
  EXPECT_EQ(t.get(2)[0].to_vector<int64_t>(), (std::vector<int64_t>{4, 10}));
  expect_error([] { TensorDataset({zeros({3}), zeros({4})}); }, "tensors must share dim 0");
  expect_error([&] { ds.get(5); }, "index 5 out of range for size 5");
}

TEST(DataLoader, BatchShapesAndDropLast) {
  auto ds = numbered(10);
  DataLoader keep(ds, {.batch_size = 4});
  EXPECT_EQ(keep.num_batches(), 3);
  std::vector<Shape> shapes;
  for (const Example& b : keep) shapes.push_back(b[0].shape());
  EXPECT_EQ(shapes, (std::vector<Shape>{{4, 2}, {4, 2}, {2, 2}}));
  EXPECT_EQ(epoch_labels(keep), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  DataLoader drop(ds, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(drop.num_batches(), 2);
  EXPECT_EQ(epoch_labels(drop), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  auto it = drop.begin();
  EXPECT_EQ((*it)[0].to_vector<double>(), (std::vector<double>{0, 0, 1, 10, 2, 20, 3, 30}));
  DataLoader none(ds, {.batch_size = 11, .drop_last = true});
  EXPECT_EQ(none.num_batches(), 0);
  EXPECT_TRUE(epoch_labels(none).empty());
  expect_error([&] { DataLoader(ds, {.batch_size = 0}); }, "batch_size must be positive, got 0");
}

TEST(DataLoader, SeededShuffleDeterministicPerEpoch) {
  auto ds = numbered(23);
  DataLoader a(ds, {.batch_size = 5, .shuffle = true, .seed = 7}),
      b(ds, {.batch_size = 5, .shuffle = true, .seed = 7});
  DataLoader c(ds, {.batch_size = 5, .shuffle = true, .seed = 8});
  auto a0 = epoch_labels(a), a1 = epoch_labels(a);
  auto b0 = epoch_labels(b), b1 = epoch_labels(b);
  auto c0 = epoch_labels(c);
  EXPECT_EQ(a0, b0);
  EXPECT_EQ(a1, b1);
  EXPECT_NE(a0, a1);  // a new order each epoch
  EXPECT_NE(a0, c0);  // and per seed
  // every epoch is a permutation
  std::vector<int64_t> all;
  for (auto& v : a1) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 23; i++) EXPECT_EQ(all[static_cast<size_t>(i)], i);
  // the order is a function of (seed, epoch): resuming at an epoch reproduces it
  DataLoader r(ds, {.batch_size = 5, .shuffle = true, .seed = 7});
  r.set_epoch(1);
  EXPECT_EQ(epoch_labels(r), a1);
  // rows stay together
  for (const Example& batch : a) {
    auto x = batch[0].to_vector<double>();
    auto y = batch[1].to_vector<int64_t>();
    for (size_t k = 0; k < y.size(); k++) EXPECT_EQ(x[2 * k + 1], 10.0 * static_cast<double>(y[k]));
  }
}

TEST(DataLoader, PrefetchGivesIdenticalBatches) {
  auto ds = numbered(37);
  for (int64_t prefetch : {1, 3, 64}) {
    DataLoader on(ds, {.batch_size = 4, .shuffle = true, .seed = 3, .prefetch = prefetch});
    DataLoader off(ds, {.batch_size = 4, .shuffle = true, .seed = 3, .prefetch = 0});
    for (int e = 0; e < 3; e++) EXPECT_EQ(epoch_labels(on), epoch_labels(off)) << "prefetch " << prefetch;
  }
  // stopping an epoch early, starting another, and destroying a loader mid-epoch are clean
  DataLoader l(ds, {.batch_size = 2, .prefetch = 4});
  auto it = l.begin();
  ++it;
  EXPECT_EQ((*it)[1].to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(epoch_labels(l).size(), 19u);
  {
    DataLoader tmp(ds, {.batch_size = 1, .prefetch = 2});
    auto t = tmp.begin();
  }
}

namespace {
// a dataset whose example 5 fails: errors from the prefetch thread reach the caller
class Failing : public Dataset {
 public:
  int64_t size() const override { return 8; }
  HostExample get_host(int64_t i) const override {
    if (i == 5) throw Error("kiln: example 5 is broken");
    return {HostTensor::of(std::vector<int64_t>{i}, {1}, DType::I64)};
  }
};
}  // namespace

TEST(DataLoader, ErrorsFromThePrefetchThreadReachTheCaller) {
  Failing ds;
  for (int64_t prefetch : {0, 2}) {
    DataLoader l(ds, {.batch_size = 2, .prefetch = prefetch});
    int64_t seen = 0;
    expect_error(
        [&] {
          for (const Example& b : l) seen += b[0].numel();
        },
        "example 5 is broken");
    EXPECT_EQ(seen, 4);
  }
}

TEST(DataLlmc, ReadsShardsAndRejectsBadFiles) {
  TempDir dir;
  std::vector<uint16_t> tokens = {0, 1, 50256, 65535, 7, 300};
  std::string path = dir.file("shard.bin");
  write_llmc_tokens(path, tokens);
  auto bytes = read_bytes(path);
  ASSERT_EQ(bytes.size(), 1024u + 12);
  EXPECT_EQ(bytes[0] | bytes[1] << 8 | bytes[2] << 16 | bytes[3] << 24, 20240520);
  EXPECT_EQ(bytes[1024 + 4], 50256 & 0xff);  // little-endian tokens
  EXPECT_EQ(read_llmc_tokens(path), tokens);
  Tensor t = load_llmc_tokens(path);
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 50256, 65535, 7, 300}));
  EXPECT_EQ(load_llmc_tokens(path, DType::I32).dtype(), DType::I32);
  expect_error([&] { load_llmc_tokens(path, DType::F32); }, "dtype must be i64 or i32");

  auto corrupt = [&](const std::string& name, std::vector<uint8_t> b) {
    write_bytes(dir.file(name), b);
    return dir.file(name);
  };
  auto b = bytes;
  b[0] ^= 1;
  expect_error([&] { read_llmc_tokens(corrupt("magic.bin", b)); },
               "bad magic number 20240521 (expected 20240520)");
  b = bytes;
  b[4] = 2;
  expect_error([&] { read_llmc_tokens(corrupt("version.bin", b)); }, "unsupported version 2 (expected 1)");
  b = bytes;
  b.resize(b.size() - 1);
  expect_error([&] { read_llmc_tokens(corrupt("trunc.bin", b)); },
               "truncated: header says 6 tokens (1036 bytes with the header) but the file has 1035 bytes");
  b.resize(100);
  expect_error([&] { read_llmc_tokens(corrupt("short.bin", b)); },
               "file has 100 bytes, shorter than the 1024-byte header");
  b = bytes;
  b.push_back(0);
  expect_error([&] { read_llmc_tokens(corrupt("long.bin", b)); }, "but the file has 1037 bytes");
  expect_error([&] { read_llmc_tokens(dir.file("missing.bin")); }, "cannot open");
}

TEST(DataTokenDataset, SequentialAndRandomWindows) {
  std::vector<int64_t> toks;
  for (int64_t i = 0; i < 20; i++) toks.push_back(100 + i);
  TokenDataset seq(toks, {.block_size = 4});
  EXPECT_EQ(seq.size(), 4);  // (20 - 1) / 4
  Example e = seq.get(2);
  EXPECT_EQ(e[0].to_vector<int64_t>(), (std::vector<int64_t>{108, 109, 110, 111}));
  EXPECT_EQ(e[1].to_vector<int64_t>(), (std::vector<int64_t>{109, 110, 111, 112}));
  TokenDataset rnd(toks,
                   {.block_size = 5, .random = true, .seed = 11, .num_samples = 50, .dtype = DType::I32});
  TokenDataset rnd2(toks,
                    {.block_size = 5, .random = true, .seed = 11, .num_samples = 50, .dtype = DType::I32});
  EXPECT_EQ(rnd.size(), 50);
  std::set<int64_t> offsets;
  for (int64_t i = 0; i < 50; i++) {
    int64_t o = rnd.offset(i);
    EXPECT_EQ(o, rnd2.offset(i));
    EXPECT_GE(o, 0);
    EXPECT_LE(o, 20 - 5 - 1);
    offsets.insert(o);
  }
  EXPECT_GT(offsets.size(), 5u);
  Example r = rnd.get(7);
  EXPECT_EQ(r[0].dtype(), DType::I32);
  int64_t o = rnd.offset(7);
  EXPECT_EQ(r[1].to_vector<int64_t>()[4], 100 + o + 5);
  // batches through a loader: (B, block_size)
  DataLoader loader(seq, {.batch_size = 3});
  auto it = loader.begin();
  EXPECT_EQ((*it)[0].shape(), (Shape{3, 4}));
  EXPECT_EQ((*it)[1].to_vector<int64_t>()[4], 105);
  expect_error([&] { TokenDataset(toks, {.block_size = 20}); },
               "20 tokens are fewer than block_size + 1 = 21");
  expect_error([&] { TokenDataset(toks, {.block_size = 0}); }, "block_size must be positive");
}

TEST(DataMnist, ReadsIdxFilesAndRejectsBadFiles) {
  TempDir dir;
  std::vector<uint8_t> img = be32(2051), lbl = be32(2049);
  for (uint32_t v : {3u, 2u, 4u})
    for (uint8_t byte : be32(v)) img.push_back(byte);
  for (int k = 0; k < 24; k++) img.push_back(static_cast<uint8_t>(k * 10));
  for (uint8_t byte : be32(3)) lbl.push_back(byte);
  for (uint8_t v : {7, 0, 9}) lbl.push_back(v);
  write_bytes(dir.file("img"), img);
  write_bytes(dir.file("lbl"), lbl);
  Tensor x = load_mnist_images(dir.file("img"));
  EXPECT_EQ(x.dtype(), DType::U8);
  EXPECT_EQ(x.shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(x.to_vector<int64_t>()[23], 230);
  Tensor y = load_mnist_labels(dir.file("lbl"));
  EXPECT_EQ(y.dtype(), DType::I64);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{7, 0, 9}));
  auto ds = mnist_dataset(dir.file("img"), dir.file("lbl"));
  EXPECT_EQ(ds.size(), 3);
  Example e = ds.get(2);
  EXPECT_EQ(e[0].shape(), (Shape{2, 4}));
  EXPECT_EQ(e[0].to_vector<int64_t>()[0], 160);
  EXPECT_EQ(e[1].item<int64_t>(), 9);

  auto bad = img;
  bad[3] = 0x01;  // 2049: a labels magic in an images file
  write_bytes(dir.file("bad_magic"), bad);
  expect_error([&] { load_mnist_images(dir.file("bad_magic")); },
               "bad magic number 2049 (expected 2051 for images)");
  expect_error([&] { load_mnist_labels(dir.file("img")); },
               "bad magic number 2051 (expected 2049 for labels)");
  bad = img;
  bad.pop_back();
  write_bytes(dir.file("trunc"), bad);
  expect_error([&] { load_mnist_images(dir.file("trunc")); },
               "truncated: header (3, 2, 4) needs 24 bytes of data, the file has 23");
  write_bytes(dir.file("tiny"), {0, 0});
  expect_error([&] { load_mnist_labels(dir.file("tiny")); },
               "file has 2 bytes, shorter than the 8-byte header");
  auto lbl2 = lbl;
  lbl2[7] = 2;
  lbl2.pop_back();
  write_bytes(dir.file("lbl2"), lbl2);
  expect_error([&] { mnist_dataset(dir.file("img"), dir.file("lbl2")); }, "has 3 images but");
}

TEST(DataMnist, AHeaderOfMoreElementsThanTheFileHoldsIsAnError) {
  TempDir dir;
  // 2^31 x 2^31 x 4 elements: 2^64, which a size_t product wraps to 0 (the empty file's size)
  std::vector<uint8_t> img = be32(2051);
  for (uint32_t v : {1u << 31, 1u << 31, 4u})
    for (uint8_t byte : be32(v)) img.push_back(byte);
  write_bytes(dir.file("huge"), img);
  expect_error([&] { read_mnist_images(dir.file("huge")); },
               "truncated: header (2147483648, 2147483648, 4) needs more than 2^64 bytes of data");
  // 2^62 elements fit int64, but not the file: refused before anything is allocated for them
  img[15] = 1;
  write_bytes(dir.file("big"), img);
  expect_error([&] { read_mnist_images(dir.file("big")); },
               "truncated: header (2147483648, 2147483648, 1) needs 4611686018427387904 bytes of data, the "
               "file has 0");
}

TEST(DataTokenizer, CharRoundTripSaveLoad) {
  TempDir dir;
  std::string text = "hello, wörld! ✓\nhi";
  auto tok = CharTokenizer::from_text(text);
  // sorted unique code points
  EXPECT_EQ(tok.vocab().front(), U'\n');
  EXPECT_EQ(tok.vocab().back(), U'✓');
  EXPECT_EQ(tok.vocab_size(), 14);
  auto ids = tok.encode(text);
  EXPECT_EQ(ids.size(), 18u);
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_EQ(tok.encode("h")[0],
            std::find(tok.vocab().begin(), tok.vocab().end(), U'h') - tok.vocab().begin());
  tok.save(dir.file("vocab.txt"));
  auto back = CharTokenizer::load(dir.file("vocab.txt"));
  EXPECT_EQ(back.vocab(), tok.vocab());
  EXPECT_EQ(back.decode(back.encode("wörld")), "wörld");
  expect_error([&] { tok.encode("xyz"); }, "character \"x\" (U+0078) is not in the vocabulary of 14");
  expect_error([&] { tok.encode("日"); }, "character \"日\" (U+65E5) is not in the vocabulary");
  expect_error([&] { tok.decode({99}); }, "id 99 out of range for a vocabulary of 14");
  expect_error([&] { CharTokenizer::from_text("a\xff"); }, "invalid UTF-8 at byte 1");
  write_bytes(dir.file("bad.txt"), {'x', '\n'});
  expect_error([&] { CharTokenizer::load(dir.file("bad.txt")); }, "not a character tokenizer file");
  std::string trunc = "kiln-char-tokenizer 1\n3\n97\n98\n";
  write_bytes(dir.file("trunc.txt"), std::vector<uint8_t>(trunc.begin(), trunc.end()));
  expect_error([&] { CharTokenizer::load(dir.file("trunc.txt")); }, "truncated: 2 of 3 entries");
  std::string unsorted = "kiln-char-tokenizer 1\n2\n98\n97\n";
  write_bytes(dir.file("unsorted.txt"), std::vector<uint8_t>(unsorted.begin(), unsorted.end()));
  expect_error([&] { CharTokenizer::load(dir.file("unsorted.txt")); }, "sorted and unique");
}

TEST(DataTokenizer, ByteRoundTrip) {
  ByteTokenizer tok;
  std::string s = "any bytes: \x01\xff\xc3\xa9";
  s.push_back('\0');
  auto ids = tok.encode(s);
  EXPECT_EQ(ids.size(), s.size());
  EXPECT_EQ(ids[12], 255);
  EXPECT_EQ(tok.decode(ids), s);
  EXPECT_EQ(ByteTokenizer::vocab_size(), 256);
  expect_error([&] { tok.decode({256}); }, "id 256 is outside [0, 256)");
  Tensor t = tensor(ids);
  EXPECT_EQ(t.dtype(), DType::I64);
}

TEST(DataFiles, ADirectoryIsNamedAsSuch) {
  TempDir dir;
  std::string d = dir.file("shards");
  fs::create_directories(d);
  std::string want = "\"" + d + "\": is a directory, not a file";
  expect_error([&] { read_llmc_tokens(d); }, want);
  expect_error([&] { load_mnist_images(d); }, want);
  expect_error([&] { load_mnist_labels(d); }, want);
  expect_error([&] { CharTokenizer::load(d); }, want);
  expect_error([&] { io::load_safetensors(d); }, d + ": is a directory, not a file");
  expect_error([&] { io::load_checkpoint(d); }, d + ": is a directory, not a file");
}

TEST(DataTokenizer, NumbersOutOfRangeAreRejectedNotWrapped) {
  TempDir dir;
  auto load = [&](const std::string& text) {
    write_bytes(dir.file("v.txt"), std::vector<uint8_t>(text.begin(), text.end()));
    return CharTokenizer::load(dir.file("v.txt"));
  };
  EXPECT_EQ(load("kiln-char-tokenizer 1\n2\n97\n1114111\n").vocab_size(), 2);
  // 2^32 + 97 once read as 'a'
  expect_error([&] { load("kiln-char-tokenizer 1\n1\n4294967393\n"); },
               "bad entry 0: \"4294967393\" (a code point is a number in [0, 1114111])");
  expect_error([&] { load("kiln-char-tokenizer 1\n1\n1114112\n"); }, "bad entry 0");
  expect_error([&] { load("kiln-char-tokenizer 1\n1\n99999999999999999999999\n"); }, "bad entry 0");
  expect_error([&] { load("kiln-char-tokenizer 1\n1\n-1\n"); }, "bad entry 0");
  expect_error([&] { load("kiln-char-tokenizer 1\n1\n 97\n"); }, "bad entry 0");
  expect_error([&] { load("kiln-char-tokenizer 1\n18446744073709551617\n97\n"); },
               "bad vocabulary size \"18446744073709551617\" (a number in [0, 1112064]");
  expect_error([&] { load("kiln-char-tokenizer 1\n1112065\n97\n"); }, "bad vocabulary size");
  // a long line is quoted in part
  expect_error([&] { load("kiln-char-tokenizer 1\n1\n" + std::string(1000, '9') + "\n"); },
               "\"" + std::string(40, '9') + "...\"");
}

TEST(DataMnist, HeaderDimensionsThatOverflowOrAreZeroAreRejected) {
  TempDir dir;
  auto idx = [&](std::vector<uint32_t> dims, size_t data) {
    std::vector<uint8_t> b = be32(dims.size() == 3 ? 2051 : 2049);
    for (uint32_t d : dims)
      for (uint8_t byte : be32(d)) b.push_back(byte);
    b.resize(b.size() + data, 7);
    write_bytes(dir.file("f"), b);
    return dir.file("f");
  };
  // (2^32 - 1)^2 * 2^32... wraps past 2^64: once possibly equal to the data size
  expect_error(
      [&] {
        load_mnist_images(idx({0xffffffffu, 0xffffffffu, 0xffffffffu}, 1));
      },
      "needs more than 2^64 bytes of data");
  expect_error([&] { load_mnist_images(idx({0x80000000u, 0x80000000u, 4}, 0)); }, "more than 2^64");
  // zero-pixel images: any count of them would fit no data
  expect_error(
      [&] {
        load_mnist_images(idx({4000000000u, 0, 28}, 0));
      },
      "image dimensions must be at least 1, the header says (4000000000, 0, 28)");
  EXPECT_EQ(load_mnist_images(idx({0, 28, 28}, 0)).shape(), (Shape{0, 28, 28}));  // an empty set is fine
  EXPECT_EQ(load_mnist_labels(idx({5}, 5)).numel(), 5);
}
