// The tile runtime on a GPU (part of cuda_device.h): DMA between tensors and blocks.
#pragma once
#include "kiln/tile/cuda_cb.h"

namespace kiln::tile::cuda {

// ---- DMA between tensors and blocks ----
struct Rect {
  long long r0, c0;  // elements
  int rows, cols;    // clipped to the tensor (at most a block's)
};

// The element rectangle of a slice, with the CPU backend's checks (a bad slice would fault). Sizes
// are known non-negative and at most the block's before `row > extent - rows` is tested, so no
// bound is ever formed as row + rows (a slice at row INT64_MAX would wrap past it).
inline Rect slice_rect(int t, const CbLayout& cb, int cbid, abi::Slice s, abi::Loc at) {
  if (t < 0 || t >= P().ntensors) fail_role(cuda_abi::kBadId, t, at, 1);
  const cuda_abi::TensorParam& v = P().tensors[t];
  if (v.tiles) {
    long long R = (v.rows + 31) / 32, C = (v.cols + 31) / 32;
    if (cb.tile_rows != 32 || s.rows != cb.rows || s.cols != cb.cols || s.row < 0 || s.col < 0 ||
        s.row > R - s.rows || s.col > C - s.cols)
      fail_role(cuda_abi::kBadSlice, t * 64 + cbid, at, s.row, s.col, s.rows, s.cols);
    long long r0 = s.row * 32, c0 = s.col * 32, h = s.rows * 32, w = s.cols * 32;
    return Rect{r0, c0, static_cast<int>(h < v.rows - r0 ? h : v.rows - r0),
                static_cast<int>(w < v.cols - c0 ? w : v.cols - c0)};
  }
  if (s.rows < 0 || s.cols < 0 || s.rows > cb.height() || s.cols > cb.cols * 32LL || s.row < 0 || s.col < 0 ||
      s.row > v.rows - s.rows || s.col > v.cols - s.cols)
    fail_role(cuda_abi::kBadSlice, t * 64 + cbid, at, s.row, s.col, s.rows, s.cols);
  return Rect{s.row, s.col, static_cast<int>(s.rows), static_cast<int>(s.cols)};
}

// Whole rows of the rectangle move as bulk copies: 16-byte aligned starts and lengths.
inline bool bulk_rows(const cuda_abi::TensorParam& v, const Rect& r) {
  const int es = v.elem_bytes;
  return (v.data % 16) == 0 && (v.cols * es) % 16 == 0 && (r.c0 * es) % 16 == 0 && (r.cols * es) % 16 == 0;
}

// Transfer ids: reads (n-th DMA into the slot) n << 10 | cb << 5 | slot, with n's parity only;
// writes and multicast sends kWriteId; multicast receives below zero.
inline constexpr int kWriteId = 1 << 30;

// dma_read's general case (out of line: see record): bulk row copies with the padding written
// around them, or unaligned slices element by element; each thread arrives on `bar` when its
// direct writes are done.
__noinline__ void dma_read_general(const Rect& r, const cuda_abi::TensorParam& v, const CbLayout& cb,
                                   unsigned char* dst, const unsigned char* src, unsigned pad_bits, bool bulk,
                                   bool padded, unsigned* issued, unsigned long long* sig,
                                   unsigned long long want, unsigned bar) {
  const int es = v.elem_bytes, bw = cb.cols * 32, bh = cb.height();
  const unsigned n = *issued;
  role_sync();  // every thread has read the count and the signature
  if (leader()) {
    *issued = n + 1;
    *sig = want;
    if (bulk) mbar_expect_tx(bar, static_cast<unsigned>(r.rows * r.cols * es));  // before any copy lands
  }
  role_sync();
  unsigned async_arrivals = 0;
  if (bulk) {
    for (int i = role_rank(); i < r.rows; i += role_size())
      bulk_read(smem_addr(dst + i * bw * es), src + i * v.cols * es, static_cast<unsigned>(r.cols * es), bar);
    // padding: the columns right of the slice (whole 16-byte chunks), then the rows below it
    const Vec16 p16{pad_bits, pad_bits, pad_bits, pad_bits};
    const int chunks = bw * es / 16, first = r.cols * es / 16;
    if (!padded && first < chunks)
      for (int q = role_rank(); q < r.rows * (chunks - first); q += role_size())
        reinterpret_cast<Vec16*>(dst + (q / (chunks - first)) * bw * es)[first + q % (chunks - first)] = p16;
    Vec16* below = reinterpret_cast<Vec16*>(dst + r.rows * bw * es);
    if (!padded)
      for (int q = role_rank(); q < (bh - r.rows) * chunks; q += role_size()) below[q] = p16;
  } else {
    // the slice's elements (consecutive threads take consecutive ones, so even a column's loads
    // are in flight together; 4-byte ones as asynchronous copies the barrier's phase waits for,
    // so the role goes on before they land), then the padding unless it is in place
    for (int q = role_rank(); q < r.rows * r.cols; q += role_size()) {
      const int i = q / r.cols, j = q % r.cols;
      unsigned char* d = dst + (i * bw + j) * es;
      const unsigned char* g = src + (static_cast<long long>(i) * v.cols + j) * es;
      if (es == 4)
        cp_async4(smem_addr(d), g);
      else
        *reinterpret_cast<unsigned short*>(d) = ld_cg_u16(g);
    }
    if (es == 4) {
      mbar_arrive_after_copies(bar);
      async_arrivals = 1;
    }
    if (!padded)
      for (int q = role_rank(); q < bh * bw; q += role_size()) {
        const int i = q / bw, j = q % bw;
        if (i < r.rows && j < r.cols) continue;
        unsigned char* d = dst + q * es;
        if (es == 4)
          *reinterpret_cast<unsigned*>(d) = pad_bits;
        else
          *reinterpret_cast<unsigned short*>(d) = static_cast<unsigned short>(pad_bits);
      }
  }
  role_arrive(bar, async_arrivals);  // each thread releases its own direct writes
  role_sync();
}

// tensor -> block. Rows the bulk engine can copy are issued by the role's threads, a row each;
// the rest of the block (padding, and unaligned slices element by element) is written directly.
// The slot's dma barrier completes when the copies land and the role has written the rest.
inline int dma_read(int t, abi::Slice s, abi::BlockRef b, float pad, abi::Loc at) {
  check_cb(b.cb, at);
  const CbLayout cb = cb_layout(b.cb);
  const Rect r = slice_rect(t, cb, b.cb, s, at);
  const cuda_abi::TensorParam& v = P().tensors[t];
  const int es = v.elem_bytes, bw = cb.cols * 32, bh = cb.height();
  unsigned char* dst = slot_data(b.cb, b.slot);
  const unsigned char* src = reinterpret_cast<const unsigned char*>(v.data) + (r.r0 * v.cols + r.c0) * es;
  unsigned pad_bits = __float_as_uint(pad);
  if (es == 2) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(pad));
    pad_bits = h | (static_cast<unsigned>(h) << 16);
  }
  // a read still landing in this block (a data-movement role's earlier DMA, not waited) completes
  // first: each read completes its own phase of the slot's dma barrier
  if (!is_compute()) settle_dma(b.cb, static_cast<unsigned>(b.slot), at);
  role_sync();  // the role's earlier DMA reads have counted themselves
  unsigned* issued = dma_count(b.cb, b.slot);
  unsigned long long* sig = pad_sig(b.cb, static_cast<unsigned>(b.slot));
  const unsigned long long want =
      static_cast<unsigned long long>(pad_bits) << 32 | static_cast<unsigned>(r.rows + 1) << 16 | r.cols;
  const unsigned n = *issued, bar = dma_bar(b.cb, b.slot);
  const int id = static_cast<int>(((n & 1) << 10) | (b.cb << 5) | b.slot);
  // one box per 256 rows through the slice's tensor map where it has one (and the padding is the
  // copy engine's zeros, or the block lies inside the tensor): the leader alone issues them
  if (cb.shape >= 0 && v.map_base >= 0 && (pad_bits == 0 || (r.rows == bh && r.cols == bw))) {
    role_sync();  // every thread has read the count
    if (leader()) {
      *issued = n + 1;
      *sig = want;
      // every box counts its whole size, the zeros outside the tensor included
      mbar_expect_tx(bar, static_cast<unsigned>(bh * bw * es));
      const cuda_abi::TensorMap* map = &kiln_tile_block.maps->map[v.map_base + cb.shape];
      for (int h = 0; h < bh; h += 256)
        tensor_read(smem_addr(dst + h * bw * es), map, static_cast<int>(r.c0), static_cast<int>(r.r0 + h),
                    bar);
    }
    role_arrive(bar);
    role_sync();
    trace(cuda_abi::kTraceDmaRead, b.cb);
    return id;
  }
  const bool bulk = bulk_rows(v, r) && r.cols > 0;
  const bool padded = *sig == want;  // the padding from the slot's last read is still in place
  if (bulk && (padded || (r.rows == bh && r.cols == bw)) && r.rows <= role_size()) {
    // a bulk copy per row, nothing to pad: the leader adds the bytes to expect, then each thread
    // issues its row and arrives
    role_sync();  // every thread has read the count and the signature
    if (leader()) {
      *issued = n + 1;
      *sig = want;
      mbar_expect_tx(bar, static_cast<unsigned>(r.rows * r.cols * es));
    }
    role_sync();
    const int i = role_rank();
    if (i < r.rows)
      bulk_read(smem_addr(dst + i * bw * es), src + static_cast<long long>(i) * v.cols * es,
                static_cast<unsigned>(r.cols * es), bar);
    role_arrive(bar);
    trace(cuda_abi::kTraceDmaRead, b.cb);
    return id;
  }
  dma_read_general(r, v, cb, dst, src, pad_bits, bulk, padded, issued, sig, want, bar);
  trace(cuda_abi::kTraceDmaRead, b.cb);
  return id;
}

// block -> tensor: bulk copies a row each where aligned (complete at transfer_wait, or at the
// block's pop), plain stores elsewhere (done when every thread returns).
inline int dma_write(abi::BlockRef b, int t, abi::Slice s, abi::Loc at) {
  check_cb(b.cb, at);
  if (t < 0 || t >= P().ntensors) fail_role(cuda_abi::kBadId, t, at, 1);
  if (!P().tensors[t].output) fail_role(cuda_abi::kInputWrite, t, at);
  const CbLayout cb = cb_layout(b.cb);
  const Rect r = slice_rect(t, cb, b.cb, s, at);
  const cuda_abi::TensorParam& v = P().tensors[t];
  settle_dma(b.cb, b.slot, at);
  // the role's stores into the block come first (a compute role that stored nothing since its last
  // barrier needs none: its stores' fences are done)
  if (!is_compute() || warp_flag(kiln_tile_block.stored)) role_sync();
  const int es = v.elem_bytes, bw = cb.cols * 32;
  const unsigned char* blk = slot_data(b.cb, b.slot);
  unsigned char* dst = reinterpret_cast<unsigned char*>(v.data) + (r.r0 * v.cols + r.c0) * es;
  trace(cuda_abi::kTraceDmaWrite, b.cb);
  if (cb.shape >= 0 && v.map_base >= 0) {  // boxes through the tensor map; the leader's bulk group
    fence_async_shared();
    if (leader()) {
      const cuda_abi::TensorMap* map = &kiln_tile_block.maps->map[v.map_base + cb.shape];
      for (int h = 0; h < cb.rows * 32; h += 256)
        tensor_write(map, static_cast<int>(r.c0), static_cast<int>(r.r0 + h),
                     smem_addr(blk + h * cb.cols * 32 * es));
      bulk_commit();
    }
    return kWriteId;
  }
  if (bulk_rows(v, r)) {
    fence_async_shared();
    if (r.cols > 0) {
      for (int i = role_rank(); i < r.rows; i += role_size())
        bulk_write(dst + static_cast<long long>(i) * v.cols * es, smem_addr(blk + i * bw * es),
                   static_cast<unsigned>(r.cols * es));
      bulk_commit();
    }
    return kWriteId;
  }
  for (int q = role_rank(); q < r.rows * r.cols; q += role_size()) {
    const int i = q / r.cols, j = q % r.cols;
    unsigned char* g = dst + (static_cast<long long>(i) * v.cols + j) * es;
    if (es == 4)
      *reinterpret_cast<unsigned*>(g) = *reinterpret_cast<const unsigned*>(blk + (i * bw + j) * es);
    else
      *reinterpret_cast<unsigned short*>(g) =
          *reinterpret_cast<const unsigned short*>(blk + (i * bw + j) * es);
  }
  return kWriteId;
}

}  // namespace kiln::tile::cuda
