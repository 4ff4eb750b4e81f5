// config.txt of a `kiln train` model directory (see model_dir.h).
#include "model_dir.h"

#include <fstream>
#include <sstream>

#include "kiln/error.h"

namespace kiln::cli {

void save_config(const std::string& path, const nn::GPTConfig& c) {
  std::ofstream f(path);
  f << "vocab_size " << c.vocab_size << "\nblock_size " << c.block_size << "\nn_layer " << c.n_layer
    << "\nn_head " << c.n_head << "\nn_embd " << c.n_embd << "\ndropout " << c.dropout << "\nbias "
    << (c.bias ? 1 : 0) << "\n";
  if (!f) throw Error("kiln: cannot write " + path);
}

nn::GPTConfig load_config(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error("kiln: cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::istringstream in(ss.str());
  nn::GPTConfig c;
  std::string key;
  double v;
  int seen = 0;
  while (in >> key >> v) {
    seen++;
    if (key == "vocab_size")
      c.vocab_size = static_cast<int64_t>(v);
    else if (key == "block_size")
      c.block_size = static_cast<int64_t>(v);
    else if (key == "n_layer")
      c.n_layer = static_cast<int64_t>(v);
    else if (key == "n_head")
      c.n_head = static_cast<int64_t>(v);
    else if (key == "n_embd")
      c.n_embd = static_cast<int64_t>(v);
    else if (key == "dropout")
      c.dropout = v;
    else if (key == "bias")
      c.bias = v != 0;
    else
      throw Error("kiln: " + path + ": unknown field '" + key + "'");
  }
  if (!in.eof() || seen == 0)
    throw Error("kiln: " + path + " is not a kiln config (expected 'name value' lines)");
  return c;
}

}  // namespace kiln::cli
