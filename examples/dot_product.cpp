// [1, 2] . [3, 4] = 11. Run with KILN_DEBUG=5 KILN_NOOPT=1 to see the kernel AST, the linear
// program and the generated C source.
#include <kiln/kiln.h>

#include <iostream>

int main() try {
  kiln::Tensor a = kiln::tensor({1.0f, 2.0f});
  kiln::Tensor b = kiln::tensor({3.0f, 4.0f});
  float r = a.dot(b).item<float>();
  std::cout << r << "\n";
  return r == 11.0f ? 0 : 1;
} catch (const kiln::Error& e) {  // a bad KILN_* setting, no C compiler, ...
  std::cerr << e.what() << "\n";
  return 1;
}
