// KILN_HFUSE for a scope: grouped (2) or not (0) in every realize; the setting comes back after.
#pragma once
#include <kiln/kiln.h>

namespace kiln::testing {

struct HFuse {
  int before = settings().hfuse;
  explicit HFuse(bool on) { settings().hfuse = on ? 2 : 0; }
  ~HFuse() { settings().hfuse = before; }
};

// f() with horizontal fusion on or off.
template <class F>
auto with_hfuse(bool on, F f) {
  HFuse scope(on);
  return f();
}

}  // namespace kiln::testing
