// Uses kiln as a package: prints the softmax of a small vector and checks it sums to 1.
#include <kiln/kiln.h>

#include <cmath>
#include <iostream>

int main() {
  kiln::Tensor x = kiln::tensor({1.0f, 2.0f, 3.0f});
  kiln::Tensor p = x.softmax(0);
  std::cout << p << "\n";
  return std::fabs(p.sum().item<float>() - 1.0f) < 1e-5f ? 0 : 1;
}
