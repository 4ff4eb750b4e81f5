// The ref device's form of a lowered linear program (codegen/program.h): decoded once into a flat
// array of steps over a register file, each step's opcode already specialized by value kind, so
// running it looks at no dtype, name or string. decode.cpp builds it; execute.cpp runs it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/program.h"
#include "ir/scalar_alu.h"
#include "kiln/dtype.h"

namespace kiln::runtime::ref_device {

// One register. Values keep the C kernels' register types (codegen/render_base.cpp value_type):
// f32, f16 and bf16 in `f` (halves compute in float), f64 in `d`, every integer and bool in `i`
// wrapped to its dtype (u64 as its bits).
union Value {
  int64_t i;
  uint64_t u;
  float f;
  double d;
};

// Opcodes by value kind: F (float registers), D (double), I (integers and bool). Steps read
// registers a and b (always valid registers), c where a third source is named, and `imm` as a number.
enum class Code : uint8_t {
  // loops: RANGE sets dst = a and jumps to imm when a >= b; ENDRANGE steps dst and jumps back to
  // imm while it is below b
  RANGE,
  ENDRANGE,
  // memory, global imm: dst = [a] where b (0 where not); [a] = b; [a] += b. `type` is the element
  // type in memory.
  LOAD,
  STORE,
  STORE_ADD,
  // accumulators and their lanes: dst = a; R[dst .. dst+imm) = a; dst = R[a + lane], the lane
  // being the row-major index of the lane loops in lane_indices[imm] (an accumulate into a lane is
  // its op with Step::lane set)
  COPY,
  LANE_FILL,
  LANE_READ,
  // unary
  EXP2_F,
  EXP_F,
  LOG2_F,
  SIN_F,
  SQRT_F,
  TRUNC_F,
  RECIP_F,
  EXP2_D,
  LOG2_D,
  SIN_D,
  SQRT_D,
  TRUNC_D,
  RECIP_D,
  CAST_F,
  CAST_D,
  CAST_I,   // from the kind named to `type`
  BITCAST,  // from `from` to `type`
  // binary and ternary
  ADD_F,
  MUL_F,
  DIV_F,
  IDIV_F,
  MAX_F,
  CMPLT_F,
  CMPNE_F,
  MULACC_F,
  FMA_F,
  ADD_D,
  MUL_D,
  DIV_D,
  IDIV_D,
  MAX_D,
  CMPLT_D,
  CMPNE_D,
  MULACC_D,
  FMA_D,
  ADD_I,
  MUL_I,
  IDIV_I,
  MOD_I,
  MAX_I,
  CMPLT_I,
  CMPNE_I,
  AND_I,
  OR_I,
  XOR_I,
  SHL_I,
  SHR_I,
  MULACC_I,
  WHERE,
};

struct Step {
  Code code;
  DType type = DType::I64;  // the result's dtype (a load's or store's element type)
  DType from = DType::I64;  // the sources' dtype (comparisons, casts, bitcasts, MAX, IDIV, MOD, SHR)
  int32_t dst = 0, a = 0, b = 0, c = 0, imm = 0;
  int32_t lane = -1;  // an accumulate into a lane: dst and a are offset by lane_indices[lane]
};

// The lane of an accumulator with one register per lane: R[r0] * s0 + R[r1] * s1, the row-major
// index of the (at most two) lane loops open where it is read (an unused term: stride 0).
struct LaneIndex {
  int32_t r0 = 0, r1 = 0;
  int64_t s0 = 0, s1 = 0;
};

struct Decoded {
  std::string name;  // the kernel's (messages)
  std::vector<Step> steps;
  std::vector<Value> registers;  // initial register file: constants and loop bounds filled in
  std::vector<LaneIndex> lane_indices;
  std::vector<DType> globals;  // element type of each argument
  int32_t start = 0, end = 0;  // registers of the outer loop's [start, end)
};

// An integer value (its bits) wrapped to dtype t, as C stores it into a variable of that type.
inline int64_t wrap(uint64_t bits, DType t) { return ir::wrap_int(static_cast<int64_t>(bits), t); }

// Decodes a lowered program; a kiln::Error names the kernel and instruction it cannot interpret.
Decoded decode(const codegen::Program& p);

// Runs the program's outer loop over [start, end) on argument buffers args; elems[k]: how many
// elements of argument k may be addressed (a load or store outside is a kiln::Error naming it).
void execute(const Decoded& d, void* const* args, const int64_t* elems, int64_t start, int64_t end);

}  // namespace kiln::runtime::ref_device
