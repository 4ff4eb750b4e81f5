// The example from README.md: a lazy MLP layer and softmax, realized when printed.
#include <kiln/kiln.h>

#include <iostream>
using namespace kiln;

int main() {
  Tensor x = randn({256, 128}), w = randn({128, 64}), b = zeros({64});
  Tensor h = (x.matmul(w) + b).relu();           // nothing runs yet
  Tensor p = h.softmax(1);                       // still lazy
  std::cout << p.sum(1).slice(0, 0, 4) << "\n";  // realize: fused kernels, compiled and run
}
