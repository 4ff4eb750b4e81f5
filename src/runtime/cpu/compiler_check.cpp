// The compiler self-test (see compiler_check.h).
#include "runtime/cpu/compiler_check.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/atomic_file.h"
#include "runtime/cache_entry.h"
#include "runtime/file_util.h"
#include "runtime/program_cache.h"

namespace kiln::runtime {

CompilerFamily compiler_family(const std::string& version_text) {
  if (version_text.find("clang") != std::string::npos) return CompilerFamily::Clang;
  if (version_text.find("Free Software Foundation") != std::string::npos ||
      version_text.find("gcc") != std::string::npos || version_text.find("g++") != std::string::npos)
    return CompilerFamily::Gcc;
  return CompilerFamily::Other;
}

std::string base_flags(Language lang, CompilerFamily family) {
  std::string f = "-march=native -fPIC -fno-math-errno -ffp-contract=off";
  if (lang == Language::C) {
    f += " -fwrapv -std=gnu11";
    // honours the renderer's "omp simd" pragmas (no OpenMP runtime)
    if (family != CompilerFamily::Other) f += " -fopenmp-simd";
  } else {
    f += " -std=c++20";
  }
  return f;
}

std::vector<std::string> candidate_opt_flags(Language lang, CompilerFamily family) {
  if (family == CompilerFamily::Gcc) {
    // GCC's loop vectorizer built kiln's masked selects (cat, pad) and reverse-stride sums (flip)
    // wrong in GCC 12 and 13, also in shapes no canary reproduces (the differential fuzzer found
    // them). It runs with its "very cheap" cost model (no loop versioning or peeling: the fuzzer's
    // GCC 13 findings go away) and without complete unrolling of short loops (GCC 12's flipped sum);
    // without the loop vectorizer the matmul kernels are several times slower.
    // -fno-tree-partial-pre: GCC 12 miscompiles some vectorized masked loops (a padded bf16 copy)
    // after partial redundancy elimination on AVX-512. GCC 13 drops the masked-off half of a
    // where() summed in a reduce when it uses AVX-512's mask registers: the next level keeps the
    // vectorizer on AVX2.
    const std::string pre = lang == Language::C ? " -fno-tree-partial-pre" : "";
    const std::string vec = "-O3" + pre + " -fvect-cost-model=very-cheap --param=max-completely-peel-times=1";
    return {vec, vec + " -mno-avx512f", "-O3" + pre + " -fno-tree-loop-vectorize", "-O1"};
  }
  return {"-O3", "-O1"};
}

const char* canary_source() {
  return R"CANARY(/* kiln's compiler self-test: kernels in the shapes kiln generates, with known answers. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#ifdef __cplusplus
#define KR __restrict
#else
#define KR restrict
#endif
#define NOINLINE __attribute__((noinline))
/* sum of a (6, 2) tensor flipped on both axes: reverse-stride loads in a nested reduce */
NOINLINE void flip_sum(float* KR out, const float* KR in) {
  float acc = 0.0f;
  for (int64_t i = 0; i < 6; i++)
    for (int64_t j = 0; j < 2; j++) {
      int64_t k = i * -2LL + j * -1LL + 11LL;
      acc = acc + in[k];
    }
  out[0] = acc;
}
/* the same over (rows, cols) known only at run time */
NOINLINE void flip_sum_n(float* KR out, const float* KR in, int64_t rows, int64_t cols) {
  float acc = 0.0f;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) acc = acc + in[rows * cols - 1 - i * cols - j];
  out[0] = acc;
}
/* cat({x, x}, 0) of a (rows, 2) tensor: two masked loads selected per element */
NOINLINE void cat_rows(float* KR out, const float* KR in, int64_t rows, int64_t start, int64_t end) {
  for (int64_t g = start; g < end; g++) {
    int64_t r = g / 2;
    int lo = r < rows, hi = lo ^ 1;
    float a = hi ? in[g - rows * 2] : 0;
    float b = lo ? in[g] : 0;
    out[g] = hi ? (hi ? a : 0.0f) : (lo ? b : 0.0f);
  }
}
/* a padded, flipped copy of 16-bit values (bf16 storage) */
NOINLINE void pad_flip(uint16_t* KR out, const uint16_t* KR in, int64_t n, int64_t start, int64_t end) {
  for (int64_t g = start; g < end; g++) {
    int ok = g >= 2 && g < n + 2;
    out[g] = ok ? in[n + 1 - g] : (uint16_t)0x3f80u;
  }
}
/* cat of a (7, 3) and a (4, 3) tensor along rows, then |x| as max(x, -x): an outer loop that
   selects between two masked reads around an inner loop of 3 */
NOINLINE void cat_abs(float* KR out, const float* KR b, const float* KR a, int64_t start, int64_t end) {
  for (int64_t g = start; g < end; g++) {
    int64_t base = g * 3LL;
    int lo = g < 7LL, hi = lo ^ 1, sel = hi ? 1 : 0;
    for (int64_t j = 0; j < 3; j++) {
      int64_t k = base + j;
      float x = (hi ? b[k + -21LL] : 0);
      float xs = hi ? x : 0.0f;
      float y = (lo ? a[k] : 0);
      float ys = lo ? y : 0.0f;
      float v = sel ? xs : ys;
      float m = v * -1.0f;
      out[k] = (((v != v) | (v > m)) ? v : m);
    }
  }
}
/* the same with the split and the row length known at run time */
NOINLINE void cat_abs_n(float* KR out, const float* KR b, const float* KR a, int64_t rows, int64_t cols,
                        int64_t start, int64_t end) {
  for (int64_t g = start; g < end; g++) {
    int lo = g < rows, hi = lo ^ 1;
    for (int64_t j = 0; j < cols; j++) {
      int64_t k = g * cols + j;
      float v = hi ? b[k - rows * cols] : (lo ? a[k] : 0.0f);
      float m = v * -1.0f;
      out[k] = (((v != v) | (v > m)) ? v : m);
    }
  }
}
/* x*x - y, which differs when contracted into one fused multiply-add */
NOINLINE void mul_sub(float* KR out, const float* KR x, const float* KR y, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = x[i] * x[i] - y[i];
}
NOINLINE float mul_sub1(float x, float y) { return x * x - y; }
/* a gradient through where(m, x, y) with x and y both the same scalar: the two masked halves
   summed in a reduce of a loop-invariant value, beside a second reduce */
NOINLINE void split_select_sum(float* KR out, const float* KR x, const float* KR c, const float* KR v,
                               int64_t n) {
  float g = x[0] * 0.5f, h = x[0] * -2.0f;
  float acc0 = 0.0f, acc1 = 0.0f;
#pragma omp simd reduction(+ : acc0) reduction(+ : acc1)
  for (int64_t i = 0; i < n; i++) {
    acc0 = acc0 + h;
    float e = v[i];
    int m = c[0] < e;
    float a = m ? g : 0.0f;
    float b = m ? 0.0f : g;
    acc1 = acc1 + (a + b);
  }
  out[0] = acc0 * 0.25f + acc1;
}
NOINLINE void split_select_sum6(float* KR out, const float* KR x, const float* KR c, const float* KR v) {
  float g = x[0] * 0.5f, h = x[0] * -2.0f;
  float acc0 = 0.0f, acc1 = 0.0f;
#pragma omp simd reduction(+ : acc0) reduction(+ : acc1)
  for (int64_t i = 0; i < 6; i++) {
    acc0 = acc0 + h;
    float e = v[i];
    int m = c[0] < e;
    float a = m ? g : 0.0f;
    float b = m ? 0.0f : g;
    acc1 = acc1 + (a + b);
  }
  out[0] = acc0 * 0.25f + acc1;
}

int main(void) {
  alarm(20);
  int bad = 0;
  float in[64], out[64];
  for (int i = 0; i < 64; i++) in[i] = (float)(i + 1);
  flip_sum(out, in);
  if (out[0] != 78.0f) bad |= 1;
  for (int64_t rows = 1; rows <= 8; rows++)
    for (int64_t cols = 1; cols <= 4; cols++) {
      int64_t n = rows * cols;
      flip_sum_n(out, in, rows, cols);
      if (out[0] != (float)(n * (n + 1) / 2)) bad |= 2;
    }
  for (int64_t rows = 1; rows <= 9; rows++) {
    memset(out, 0, sizeof out);
    cat_rows(out, in, rows, 0, rows * 4);
    for (int64_t g = 0; g < rows * 4; g++)
      if (out[g] != in[g % (rows * 2)]) bad |= 4;
  }
  uint16_t h[40], ho[40];
  for (int i = 0; i < 40; i++) h[i] = (uint16_t)(0x4000 + i);
  for (int64_t n = 1; n <= 30; n++) {
    pad_flip(ho, h, n, 0, n + 4);
    for (int64_t g = 0; g < n + 4; g++)
      if (ho[g] != (g >= 2 && g < n + 2 ? h[n + 1 - g] : 0x3f80)) bad |= 8;
  }
  {
    float a[64], b[64], o[128];
    for (int i = 0; i < 64; i++) a[i] = (float)(i % 2 ? i : -i), b[i] = (float)(i % 3 ? 100 + i : -100 - i);
    cat_abs(o, b, a, 0, 11);
    for (int k = 0; k < 33; k++)
      if (o[k] != (k < 21 ? (float)k : (float)(100 + k - 21))) bad |= 32;
    for (int64_t rows = 1; rows <= 8; rows++)
      for (int64_t cols = 1; cols <= 5; cols++) {
        int64_t n = (rows + 3) * cols;
        if (n > 128 || rows * cols > 64 || n - rows * cols > 64) continue;
        cat_abs_n(o, b, a, rows, cols, 0, rows + 3);
        for (int64_t k = 0; k < n; k++) {
          float want = k < rows * cols ? a[k] : b[k - rows * cols];
          if (o[k] != (want < 0 ? -want : want)) bad |= 32;
        }
      }
  }
  float x[32], y[32], d[32];
  volatile float one = 1.0f;
  for (int i = 0; i < 32; i++) x[i] = one + 0x1p-12f, y[i] = one + 0x1p-11f;
  mul_sub(d, x, y, 32);
  for (int i = 0; i < 32; i++)
    if (d[i] != 0.0f) bad |= 16;
  if (mul_sub1(x[0], y[0]) != 0.0f) bad |= 16;
  {
    /* every element counts g = 1 once, whichever side of the mask it falls on */
    float two = 2.0f * one, c = -0.75f * one, v[16];
    for (int i = 0; i < 16; i++) v[i] = (i % 4 == 3 ? -2.0f : 1.5f) * one;
    split_select_sum6(out, &two, &c, v);
    if (out[0] != 6.0f - 6.0f) bad |= 64;
    for (int64_t n = 1; n <= 16; n++) {
      split_select_sum(out, &two, &c, v, n);
      if (out[0] != (float)n - (float)n) bad |= 64;
    }
  }
  return bad;
}
)CANARY";
}

namespace {

enum class Verdict { Right, Wrong, NoCompile };

// Compiles the canaries with `flags` and runs them; `why` says what went wrong.
Verdict try_flags(const std::string& cc, const std::string& flags, Language lang, const std::string& dir,
                  std::string& why) {
  // temporary names of this process: a killed check's files are swept like a killed compile's
  std::string stem = dir + "/canary_" + hash_hex(hash_string(flags));
  std::string src = temp_name(stem, lang == Language::C ? ".c" : ".cpp"), exe = temp_name(stem, ".bin");
  write_file_atomic(src, canary_source(), /*clean_stale=*/false);
  std::string out;
  int rc =
      run_command(shell_quote(cc) + " " + flags + " -w -o " + shell_quote(exe) + " " + shell_quote(src), out);
  std::remove(src.c_str());
  Verdict v = Verdict::Right;
  if (rc != 0) {
    v = Verdict::NoCompile;
    why = "the canaries did not compile: " + out.substr(0, 400);
  } else {
    std::string run_out;
    int status = run_command(shell_quote(exe), run_out);
    if (status != 0) {
      v = Verdict::Wrong;
      why = "canary kernels gave wrong answers (mask " + std::to_string(status) + ")";
    }
  }
  std::remove(exe.c_str());
  return v;
}

}  // namespace

std::string checked_opt_flags(const std::string& cc, const std::string& identity, Language lang,
                              CompilerFamily family, const std::string& cache_dir) {
  std::string base = base_flags(lang, family);
  std::string key = hash_hex(hash_string(identity + "\n" + base + "\n" + canary_source()));
  std::string record = cache_dir + "/cc_" + key + ".flags";
  if (auto got = read_entry(record)) return *got;
  std::string tried;
  bool compiled_any = false;
  for (const std::string& opt : candidate_opt_flags(lang, family)) {
    std::string why;
    Verdict v = try_flags(cc, base + " " + opt, lang, cache_dir, why);
    compiled_any |= v != Verdict::NoCompile;
    if (v == Verdict::Right) {
      if (settings().debug >= 1)
        std::fprintf(stderr, "kiln: compiler self-test: %s passes with %s\n", cc.c_str(), opt.c_str());
      write_entry(record, opt);
      return opt;
    }
    if (settings().debug >= 1)
      std::fprintf(stderr, "kiln: compiler self-test: %s with %s: %s\n", cc.c_str(), opt.c_str(),
                   why.c_str());
    tried += "\n  " + opt + ": " + why;
  }
  // a compiler that builds nothing is not judged here: the kernels' own compile reports its errors
  if (!compiled_any) return candidate_opt_flags(lang, family).front();
  throw Error("kiln.compile: the " + std::string(lang == Language::C ? "C" : "C++") + " compiler " + cc +
              " builds kiln's canary kernels wrong with every optimization level tried:" + tried +
              "\nuse another compiler (set " + (lang == Language::C ? "KILN_CC" : "KILN_CXX") +
              ", e.g. to clang)");
}

}  // namespace kiln::runtime
