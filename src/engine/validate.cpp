// The validate stage (see validate.h).
#include "engine/validate.h"

#include <cmath>
#include <sstream>

#include "engine/interpreter.h"
#include "kiln/error.h"

namespace kiln::engine {

namespace {

double tolerance(DType t) {
  switch (t) {
    case DType::F64: return 1e-9;
    case DType::F32: return 1e-4;
    case DType::F16: return 1e-2;
    case DType::BF16: return 3e-2;
    default: return 0;
  }
}

void validate_output(const ir::NodeRef& node, const codegen::Program& p, const std::shared_ptr<Buffer>& buf) {
  std::shared_ptr<const Buffer> host = on_host(buf);
  const Buffer& out = *host;
  ref::Array want = ref::evaluate(node, true);
  double tol = tolerance(out.dtype);
  for (int64_t i = 0; i < out.numel; i++) {
    double got = is_float(out.dtype) ? out.get_f(i) : static_cast<double>(out.get_i(i));
    double ref = want.at(i);
    bool ok = got == ref || (std::isnan(got) && std::isnan(ref)) ||
              (tol > 0 && std::fabs(got - ref) <= tol * (1 + std::fabs(ref)));
    if (!ok) {
      std::ostringstream os;
      os.precision(10);
      os << "kiln.validate: kernel " << p.name << " (output " << shape_str(node->shape) << " "
         << dtype_name(out.dtype) << ") differs from the reference interpreter at element " << i << ": got "
         << got << ", expected " << ref;
      throw Error(os.str());
    }
  }
}

}  // namespace

void validate(const schedule::Kernel& k, const codegen::Program& p,
              const std::vector<std::shared_ptr<Buffer>>& outs) {
  for (size_t o = 0; o < outs.size(); o++) {  // against the graph, not the buffer just written
    ir::set_buffer(*k.outputs[o], nullptr);
    validate_output(k.outputs[o], p, outs[o]);
    ir::set_buffer(*k.outputs[o], outs[o]);
  }
}

}  // namespace kiln::engine
