// config.txt of a `kiln train` model directory (see model_dir.h).
#include "model_dir.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "kiln/error.h"
#include "runtime/file_util.h"

namespace kiln::cli {

namespace {

// The sane range of each config.txt field: a value outside it is a damaged or hand-edited file, and
// building the model first would allocate without bound (n_layer 100000).
struct Field {
  const char* key;
  double lo, hi;
  bool integer;
};
constexpr Field kFields[] = {{"vocab_size", 1, 1 << 24, true},
                             {"block_size", 1, 1 << 20, true},
                             {"n_layer", 1, 1024, true},
                             {"n_head", 1, 1024, true},
                             {"n_embd", 1, 1 << 16, true},
                             {"dropout", 0, 0.999, false},
                             {"bias", 0, 1, true}};

std::string number_text(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

std::string read_text(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw Error("kiln: " + path + " is a directory, not a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("kiln: cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

void save_config(const std::string& path, const nn::GPTConfig& c) {
  std::ostringstream f;
  f << "vocab_size " << c.vocab_size << "\nblock_size " << c.block_size << "\nn_layer " << c.n_layer
    << "\nn_head " << c.n_head << "\nn_embd " << c.n_embd << "\ndropout " << c.dropout << "\nbias "
    << (c.bias ? 1 : 0) << "\n";
  runtime::write_file_atomic(path, f.str());  // like the model and the vocabulary beside it
}

nn::GPTConfig load_config(const std::string& path) {
  std::istringstream in(read_text(path));
  std::map<std::string, double> got;
  std::string key;
  double v;
  while (in >> key >> v) {
    auto f =
        std::find_if(std::begin(kFields), std::end(kFields), [&](const Field& f) { return key == f.key; });
    if (f == std::end(kFields)) throw Error("kiln: " + path + ": unknown field '" + key + "'");
    if (got.count(key)) throw Error("kiln: " + path + ": field '" + key + "' appears twice");
    if (!(v >= f->lo && v <= f->hi) || (f->integer && v != std::floor(v)))
      throw Error("kiln: " + path + ": " + key + " " + number_text(v) +
                  " is out of range: " + (f->integer ? "an integer " : "") + "in [" + number_text(f->lo) +
                  ", " + number_text(f->hi) + "]");
    got[key] = v;
  }
  if (!in.eof() || got.empty())
    throw Error("kiln: " + path + " is not a kiln config (expected 'name value' lines)");
  nn::GPTConfig c;
  auto i = [&](const char* k, int64_t& field) {
    if (got.count(k)) field = static_cast<int64_t>(got[k]);
  };
  i("vocab_size", c.vocab_size), i("block_size", c.block_size), i("n_layer", c.n_layer);
  i("n_head", c.n_head), i("n_embd", c.n_embd);
  if (got.count("dropout")) c.dropout = got["dropout"];
  if (got.count("bias")) c.bias = got["bias"] != 0;
  if (c.n_embd % c.n_head != 0)
    throw Error("kiln: " + path + ": n_embd " + std::to_string(c.n_embd) + " is not a multiple of n_head " +
                std::to_string(c.n_head));
  // each field in range can still multiply to more weights than this machine holds
  double bytes = 4.0 * static_cast<double>(c.num_parameters());
  double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && bytes > memory / 2)
    throw Error("kiln: " + path + ": a model of " + std::to_string(c.num_parameters()) +
                " parameters needs " + number_text(bytes / (1 << 30)) +
                " GiB for its f32 weights alone, more than half of this machine's " +
                number_text(memory / (1 << 30)) + " GiB");
  return c;
}

}  // namespace kiln::cli
