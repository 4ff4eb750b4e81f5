// kiln::io: tensors to and from files: safetensors (read, write, load into existing tensors) and
// training checkpoints (model, optimizer, step, RNG state) stored as one safetensors file.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::io {

// --- safetensors ---
// Writes `tensors` (realized; views are saved as their logical row-major values) and `metadata`
// (the header's "__metadata__") to `path` atomically: the data goes to a temporary file in the same
// directory, which is renamed over `path` only once complete, so `path` never holds a partial file.
// Names and metadata must be valid UTF-8; "__metadata__" is not a tensor name.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;  // realized, contiguous
  std::map<std::string, std::string> metadata;
};
// Reads and validates the whole file; throws kiln::Error naming the file and the problem.
SafetensorsFile load_safetensors(const std::string& path);

struct LoadReport {
  std::vector<std::string> missing;     // in targets, not in the file
  std::vector<std::string> unexpected;  // in the file, not in targets
};
// Assigns the file's tensors to the tensors of `targets` with the same names (assign_, then one
// realize of all). A name whose shape or dtype differs is always an error; missing and unexpected
// names are errors when `strict`, else reported. On error nothing is assigned.
LoadReport load_safetensors_into(const std::string& path, std::map<std::string, Tensor>& targets,
                                 bool strict = true);

// --- checkpoints ---
struct Checkpoint {
  std::map<std::string, Tensor> model;      // stored as "model.<name>"
  std::map<std::string, Tensor> optimizer;  // stored as "optim.<name>"
  int64_t step = 0;
  uint64_t rng_seed = 0, rng_offset = 0;     // a Generator's state (capture_rng / restore_rng)
  std::map<std::string, std::string> extra;  // stored in the metadata as "extra.<key>"
};
// Saves (atomically, as save_safetensors) / loads a checkpoint; scalars go to __metadata__.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);
Checkpoint load_checkpoint(const std::string& path);
// Copies a generator's (seed, offset) into the checkpoint / sets it from the checkpoint, so draws
// after a restore continue exactly where the saved run was.
void capture_rng(Checkpoint& ckpt, const Generator& g = default_generator());
void restore_rng(const Checkpoint& ckpt, Generator& g = default_generator());

}  // namespace kiln::io
