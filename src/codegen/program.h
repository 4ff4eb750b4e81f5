// The linear program: a kernel as a flat list of instructions (DEFINE_GLOBAL, CONST, RANGE, LOAD,
// ALU, DEFINE_ACC, STORE, ENDRANGE), produced by linearize and consumed by the renderers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/ops.h"
#include "kiln/dtype.h"

namespace kiln::codegen {

struct Inst {
  ir::Op op;
  DType dtype;
  std::vector<int> src;      // indices of earlier instructions
  std::vector<int64_t> arg;  // DEFINE_GLOBAL {index}; CONST {int value}; RANGE {id, size, reduce, outer,
                             // contiguous reduce: its loads step by one element, so it may vectorize;
                             // on a lane loop: 1 where its lanes are added into one accumulator};
  // DEFINE_ACC {reduce op}; ALU {1} = accumulate into src[0] (a DEFINE_ACC); STORE {1} = add into
  // the element (atomically on the GPU); VAR {global, slot}: a symbolic size, element slot of that
  // argument; a symbolic RANGE has its trip count as src[0] (its size arg is the largest). LOAD
  // (buffer, index[, valid]) reads 0 where valid is false; STORE (buffer, index, value[, gate])
  // stores nothing where gate is false (an index copy's positions)
  double fval = 0;  // CONST float value
};

struct Program {
  std::string name;    // e.g. r_16_32 (r_ reduce, E_ elementwise; loop sizes)
  std::string symbol;  // name plus a content hash: unique and stable
  std::vector<Inst> insts;
  std::vector<DType> globals;  // dtype of each DEFINE_GLOBAL, by index
  std::vector<bool> written;   // whether each global is stored to
  int64_t outer_size = 1;      // trip count of the outermost global loop (split over threads)
  double flops = 0;            // ALU operations per launch (for KILN_DEBUG=2)
  uint64_t hash = 0;           // content hash of the AST and opts
  int64_t zero_bytes = 0;      // bytes of global 0 set to zero before each run (a scatter adds into it)
  bool serial = false;         // the outer loop must not be split over threads (its steps add into one place)
  int64_t scratch_bytes = 0;   // > 0: the last global is scratch of this size, one per thread (a PACK)
};

std::string to_string(const Program& p);  // one line per instruction (KILN_DEBUG=5)

}  // namespace kiln::codegen
