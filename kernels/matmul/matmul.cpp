// y = a @ b with a (M, K) and b (K, N) in tiles. Output blocks of BM x BN tiles are numbered row
// by row; each core computes blocks [start, start + count) (runtime args), accumulating over K in
// steps of BK tiles (acc += a @ b, f32 accumulation). CBs: a_cb (BM, BK), b_cb (BK, BN), y_cb (BM, BN).
void reader() {
  long long blocks_n = b.cols() / BN, steps = a.cols() / BK;
  for (long long i = args().start; i < args().start + args().count; i++) {
    long long bm = i / blocks_n, bn = i % blocks_n;
    for (long long k = 0; k < steps; k++) {
      auto ab = a_cb.scoped_reserve();
      auto bb = b_cb.scoped_reserve();
      Transfer ta = dma(a.slice(bm * BM, k * BK, BM, BK), ab);
      Transfer tb = dma(b.slice(k * BK, bn * BN, BK, BN), bb);
      ta.wait();
      tb.wait();
    }
  }
}

void compute() {
  long long steps = a.cols() / BK;
  for (long long i = 0; i < args().count; i++) {
    auto acc = y_cb.scoped_reserve();
    acc.store(0.0f);
    for (long long k = 0; k < steps; k++) {
      auto ab = a_cb.scoped_wait();
      auto bb = b_cb.scoped_wait();
      acc += matmul(ab, bb);
    }
  }
}

void writer() {
  long long blocks_n = b.cols() / BN;
  for (long long i = args().start; i < args().start + args().count; i++) {
    auto yb = y_cb.scoped_wait();
    dma(yb, y.slice(i / blocks_n * BM, i % blocks_n * BN, BM, BN)).wait();
  }
}
