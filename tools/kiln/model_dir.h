// What `kiln train` writes and `kiln sample` reads: DIR/model.safetensors, DIR/vocab.txt and
// DIR/config.txt (one "name value" line per GPTConfig field).
#pragma once
#include <kiln/nn.h>

#include <string>

namespace kiln::cli {

void save_config(const std::string& path, const nn::GPTConfig& c);
nn::GPTConfig load_config(const std::string& path);

}  // namespace kiln::cli
