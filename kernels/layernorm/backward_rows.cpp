// LayerNorm backward with whole rows in a block: the rows variant of backward.cpp, for rows that
// fit a core's shared memory. Given the forward's mean and rstd (as 1 x N rows, f32: a block's
// statistics move as one contiguous copy into a row vector, read down a column with col_of), per
// block of BR rows (blocks of 1 x CT short tiles of BR x 32 elements, rows moved through
// element-indexed accessors), in one pass over x and dout:
//   norm = (x - mean) * rstd, dnorm = dout * w,
//   dx = (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd;
// and, with WGRAD = 1, dweight = dweight_in + sum over rows of dout * norm, dbias = dbias_in + sum
// of dout, in three steps:
//   1. each core sums its rows' dout * norm and dout over all its blocks (column sums the compute
//      role holds: on a GPU in its threads' registers, ColSums; added in dx's store, sum_into, so
//      each element of x and dout is read from shared memory once for both) and writes them as its row of
//      part_dw / part_db (cores x C, f32);
//   2. all cores meet at a barrier (each core adds 1 to semaphore `arrived` on every core,
//      mcast_inc, and a core with pieces waits for its own to count all cores); then every core owns pieces
//      [piece_start, piece_start + piece_count) of the 2 x CT tile columns of dweight then dbias and sums
//      each over the cores' rows, 32 rows per block (a reduce-scatter);
//   3. it adds the piece to dweight_in / dbias_in and writes it: gradient accumulation (+=).
// Two readers share the reads of each block (x and mean; dout and rstd): one data-movement warp
// issuing them all had been the slowest role (three were slower than two on an H200). w is read
// once per core into a row vector. Padded rows and columns (shapes not multiples of 32 or
// BR) read as 0: dout = 0 there, so they add nothing to any sum; the means over C divide by the true
// C (n_cols).
// Compile-time: CT, BR, n_cols, WGRAD (0: dx only, the weight gradients come from another kernel).

// This core's rows [start, start + count) of `data` (C each), BR a block (the last one may be
// short), into data_cb, with their elements of `stat` (1 x N) into stat_cb.
template <class D, class DC, class S, class SC>
void read_blocks(const D& data, const DC& data_cb, const S& stat, const SC& stat_cb) {
  const long long end = args().start + args().count;
  for (long long r = args().start; r < end; r += BR) {
    const long long rows = end - r < BR ? end - r : BR;
    auto db = data_cb.scoped_reserve();
    auto sb = stat_cb.scoped_reserve();
    Transfer td = dma(data.slice(r, 0, rows, n_cols), db);
    Transfer ts = dma(stat.slice(0, r, 1, rows), sb);
    td.wait();
    ts.wait();
  }
}

void reader() {
  {
    auto wb = w_cb.scoped_reserve();
    dma(w.slice(0, 0, 1, n_cols), wb).wait();
  }
  read_blocks(x, x_cb, mean, mean_cb);
  if (!WGRAD) return;
  // step 2: once every core has written its partial sums, read this core's pieces of them
  if (args().piece_count > 0) arrived.wait(num_cores());
  const long long part_rows = part_dw.rows();  // one per core
  for (long long q = args().piece_start; q < args().piece_start + args().piece_count; q++) {
    const bool dw = q < CT;  // dweight's tile columns, then dbias's
    const long long c = (dw ? q : q - CT) * 32, width = n_cols - c < 32 ? n_cols - c : 32;
    {
      auto gb = grad_in_cb.scoped_reserve();
      dma(dw ? dweight_in.slice(0, c, 1, width) : dbias_in.slice(0, c, 1, width), gb).wait();
    }
    for (long long p = 0; p < part_rows; p += 32) {
      const long long rows = part_rows - p < 32 ? part_rows - p : 32;
      auto pb = part_cb.scoped_reserve();
      dma(dw ? part_dw.slice(p, c, rows, width) : part_db.slice(p, c, rows, width), pb).wait();
    }
  }
}

// The other half of each block's reads: dout and rstd.
void dout_reader() { read_blocks(dout, dout_cb, rstd, rstd_cb); }

void compute() {
  const float inv_c = 1.0f / static_cast<float>(n_cols);
  auto wb = w_cb.scoped_wait();            // kept for every block
  auto means = means_cb.scoped_scratch();  // per row: mean(dnorm) in column 0, mean(dnorm * norm) in 1
  auto dw_sum = col_sums(x_cb), db_sum = col_sums(x_cb);  // step 1, over all the core's blocks
  for (long long i = 0; i < (args().count + BR - 1) / BR; i++) {
    auto xb = x_cb.scoped_wait();
    auto gb = dout_cb.scoped_wait();
    auto m = mean_cb.scoped_wait();
    auto rs = rstd_cb.scoped_wait();
    auto norm = (xb - bcast_cols(col_of<BR>(m))) * bcast_cols(col_of<BR>(rs));  // evaluated where stored
    auto dnorm = gb * bcast_rows(wb);
    if constexpr (CT <= 24) {  // both sums in one pass (rows up to 768: longer ones spill registers)
      means.store(to_col<0>(reduce_sum<1>(dnorm) * inv_c) + to_col<1>(reduce_sum<1>(dnorm * norm) * inv_c));
    } else {
      means.store(to_col<0>(reduce_sum<1>(dnorm) * inv_c));
      means.store(means + to_col<1>(reduce_sum<1>(dnorm * norm) * inv_c));
    }
    auto dx_of = (dnorm - bcast_col<0>(means) - norm * bcast_col<1>(means)) * bcast_cols(col_of<BR>(rs));
    auto dxb = dx_cb.scoped_reserve();
    if constexpr (WGRAD != 0)
      dxb.store(dx_of, sum_into(dw_sum, gb * norm), sum_into(db_sum, gb));  // step 1 in the same pass
    else
      dxb.store(dx_of);
  }
  {  // pushed to the writer (empty without WGRAD)
    auto dw_part = dw_part_cb.scoped_reserve();
    auto db_part = db_part_cb.scoped_reserve();
    if (WGRAD) {
      dw_part.store(dw_sum);
      db_part.store(db_sum);
    }
  }
  if (!WGRAD) return;
  const long long part_rows = part_dw.rows();
  for (long long q = 0; q < args().piece_count; q++) {  // steps 2 and 3
    auto sums = col_sums(part_cb);                      // the piece's column sums over the cores' rows
    for (long long p = 0; p < part_rows; p += 32) {
      auto pb = part_cb.scoped_wait();
      sums.add(pb);
    }
    auto acc = tile_acc_cb.scoped_scratch();
    acc.store(sums);
    auto gb = grad_in_cb.scoped_wait();
    auto ob = grad_out_cb.scoped_reserve();
    ob.store(acc + gb);
  }
}

void writer() {
  const long long end = args().start + args().count;
  for (long long r = args().start; r < end; r += BR) {
    const long long rows = end - r < BR ? end - r : BR;
    auto dxb = dx_cb.scoped_wait();
    dma(dxb, dx.slice(r, 0, rows, n_cols)).wait();
  }
  {  // step 1: this core's row of the partial sums (nothing to write without WGRAD)
    auto pw = dw_part_cb.scoped_wait();
    auto pb = db_part_cb.scoped_wait();
    if (WGRAD) {
      Transfer tw = dma(pw, part_dw.slice(core_index(), 0, 1, n_cols));
      Transfer tb = dma(pb, part_db.slice(core_index(), 0, 1, n_cols));
      tw.wait();
      tb.wait();
    }
  }
  if (!WGRAD) return;
  arrived.mcast_inc(whole_grid());  // step 2: this core's partial sums are written
  for (long long q = args().piece_start; q < args().piece_start + args().piece_count; q++) {
    const long long c = (q < CT ? q : q - CT) * 32, width = n_cols - c < 32 ? n_cols - c : 32;
    auto ob = grad_out_cb.scoped_wait();
    dma(ob, q < CT ? dweight.slice(0, c, 1, width) : dbias.slice(0, c, 1, width)).wait();
  }
}
