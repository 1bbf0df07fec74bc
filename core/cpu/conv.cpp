// CPU convolution: the entry points, which run f32 on oneDNN where it can (Note [Which convolution
// runs], core/cpu/conv_onednn.cpp), else im2col + GEMM with small images folded several to a GEMM
// (Note [Folding images into one GEMM]), and the reference they are tested against: im2col + one
// GEMM per image, images split across threads.
// Shape letters as in core/kernels/conv.h: input [N, C, H, W], weight [K, C / G, R, S], out [N, K, P, Q].
//
// Note [Convolution as GEMM]
// Unfold one image into a matrix col [C R S, P Q] whose row (c R + r) S + s holds, for every output
// pixel (p, q), the input pixel that kernel tap (c, r, s) meets there (0 where it meets padding).
// The convolution of that image is then one matrix product, per group g of channels:
//   out_n[g] [K/G, P Q] = weight[g] [K/G, C/G R S] @ col[g] [C/G R S, P Q]
// and the two backward passes are the other two products of the same three matrices:
//   d col[g] = weight[g]^T @ grad_out_n[g], folded back onto the image by col2im (windows that
//              overlap add up), and
//   d weight[g] = sum over n of grad_out_n[g] @ col[g]^T.
// The GEMM does almost all the arithmetic; im2col and col2im only move memory. A 1x1 kernel with
// stride 1 and no padding meets each pixel once, in place: its col is the image itself.
//
// Note [Parallel over images]
// Images are split across the threads; each thread unfolds its image into its own col buffer and
// runs that image's GEMMs single-threaded, so the buffer is still in the core's cache when the GEMM
// reads it. The GEMM does not start threads of its own there: parallel_for runs serially inside a
// parallel region, and OpenBLAS's OpenMP build gives a call made inside one a single thread
// (num_cpu_avail in its common_thread.h returns 1 when omp_in_parallel()); a 2-thread region of
// GEMMs shows 2 threads in /proc, not 4. The alternative, unfolding the whole batch and running one
// multithreaded GEMM over all its columns, was measured on the CNN's and a ResNet layer's shapes on
// 1 and 2 threads: its GEMM alone was never faster than the per-image GEMMs (up to 20% slower), and
// it also needs a batch-sized col buffer and a transposition of the result from [K, N P Q] to
// [N, K, P Q]. bench/conv.cpp measures the convolutions as they are. Small images are the exception
// (Note [Folding images into one GEMM]).
//
// Note [Deterministic weight gradient]
// d weight sums over the images. The batch is cut into blocks of kImagesPerBlock images at fixed
// offsets, whatever the thread count; a block accumulates its images in order (GEMMs with beta = 1)
// and the blocks' sums are then added in block order. The additions, and so the rounding, are the
// same on 1 thread as on 16, so the gradient is bit-identical. (Within an image, the products of its
// bands of output rows, Note [Bands of output rows], are added in band order.) One exception: a batch
// of a single block (N <= kImagesPerBlock) leaves its GEMMs to OpenBLAS's own threads, and OpenBLAS
// splitting one GEMM over 2 threads changed its last bits on every ResNet shape tried (Zen 3,
// OpenBLAS 0.3.21). Running them on one thread would halve a 2-thread step's weight gradients at
// batch 4, so the thread count stays part of the rule (docs/tensor.md). Folded images sum
// differently, and bit-identically on any thread count: Note [Weight gradient over the whole batch].
#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "core/cpu/conv_kernels.h"
#include "core/cpu/conv_onednn.h"
#include "core/cpu/gemm_kernels.h"  // defines: cpu::gemm, which the reference runs on directly
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/parallel.h"

namespace sg::cpu {

namespace {

constexpr int64_t kImagesPerBlock = 4;  // Note [Deterministic weight gradient]

// Note [Bands of output rows]
// An image's col can be far larger than a core's cache (7 MB for a ResNet layer of 64 channels of
// 56 x 56 and a 3x3 kernel), and then im2col writes it out to memory only for the GEMM to read it
// back. So an image is unfolded and multiplied a band of output rows at a time, each band as many
// rows as keep its col within kColBandBytes (the CNN's layers fit in one band). A band is a range
// of columns of out_n, which the GEMM reads with a leading dimension of P Q; the weight gradient
// adds the bands' products in band order, so the sum's order is still fixed by the shapes alone.
constexpr int64_t kColBandBytes = int64_t(1) << 20;

struct Band {
  int64_t begin, end;  // output rows [begin, end) of an image
};

// Note [Folding images into one GEMM]
// At small output sizes one image's GEMM is too thin to run well: ResNet34 on 64x64 images ends on
// 2x2 outputs, where an image's product has P Q = 4 columns (forward, grad_input) or an inner
// dimension of 4 (grad_weight), and OpenBLAS then spends its time packing the weight (forward,
// grad_input; 9.4 MB for 512 channels, once per image) or reading and writing the whole weight
// gradient once per image for 4 multiply-adds an element. So where one image's col is small (a
// single band), the fast path unfolds several images side by side into one col [C R S, images P Q],
// each image's columns after the previous one's, and runs one GEMM over all of them: as many images
// as give kGemmColumns columns, within kFoldedColBytes of col, where an image has at most
// kMaxFoldedPixels output pixels (at 8x8 and 7x7, ResNet34's second stage on 64x64 images and its
// last on 224x224, folding measured even with one image per GEMM, within the noise, so those keep the
// reference's way). The GEMM's side of out is then a
// [K, images P Q] staging matrix in the worker's scratch, copied from or to the images' [K, P Q]
// slices of out (a copy of K images P Q elements per C R S-long sum: a few % of the GEMM at most).
// Units of images, not images, are then what the threads split (Note [Parallel over images]); a
// batch of fewer units than threads (16 images of 2x2 make one) leaves its GEMM to OpenBLAS's own
// threads. The reference keeps one image per GEMM (images_per_gemm = 1). The weight gradient of folded
// images is summed over the whole batch at once (Note [Weight gradient over the whole batch]).
// On ResNet34's 3x3 convolution of 512 channels at 2x2, batch 16, 1 thread: the forward 6.4 ms on
// oneDNN (15 ms per image) against 5.0 folded, the weight gradient 13.2 against 5.5 (bench/conv.cpp's
// resnet64_ shapes, docs/performance.md).
constexpr int64_t kGemmColumns = 256;
constexpr int64_t kFoldedColBytes = int64_t(4) << 20;
constexpr int64_t kMaxFoldedPixels = 16;

// The columns of one GEMM: a band of one image's output rows, or whole images [n_begin, n_end)
// folded side by side (Note [Folding images into one GEMM]).
struct Unit {
  int64_t n_begin, n_end;
  Band band;
  int64_t images() const { return n_end - n_begin; }
};

struct ConvGeometry {
  int64_t N, C, H, W, K, P, Q, R, S, G;
  Conv2dParams params;
  int64_t band_rows;        // output rows per band (Note [Bands of output rows])
  int64_t images_per_gemm;  // Note [Folding images into one GEMM]; 1 in the reference

  int64_t group_rows() const { return C / G * R * S; }  // rows of a group's col = columns of its weight
  int64_t image_numel() const { return C * H * W; }
  int64_t out_image_numel() const { return K * P * Q; }
  int64_t padded_h() const { return H + 2 * params.padding.h; }
  int64_t padded_w() const { return W + 2 * params.padding.w; }
  int64_t padded_channel_numel() const { return padded_h() * padded_w(); }
  bool has_padding() const { return params.padding != Size2(0); }
  bool col_is_image() const {  // Note [Convolution as GEMM]: a pointwise kernel needs no unfolding
    return R == 1 && S == 1 && params.stride == Size2(1) && !has_padding();
  }
  int64_t band_columns(const Band& band) const { return (band.end - band.begin) * Q; }
  int64_t columns(const Unit& unit) const { return unit.images() * band_columns(unit.band); }
  // A worker's scratch: col for one unit [C R S, images_per_gemm band_rows Q], then the padded image
  // [C, padded_h, padded_w] when there is padding, then the staging matrix [K, the col's columns]
  // when images are folded.
  int64_t col_numel() const { return C * R * S * images_per_gemm * band_rows * Q; }
  int64_t padded_numel() const { return has_padding() ? C * padded_channel_numel() : 0; }
  int64_t staging_numel() const { return images_per_gemm > 1 ? K * images_per_gemm * P * Q : 0; }
  int64_t scratch_numel() const {
    return col_is_image() && images_per_gemm == 1 ? 0 : col_numel() + padded_numel() + staging_numel();
  }
  int64_t image_work() const { return out_image_numel() * group_rows(); }  // multiply-adds of one image's product
  int64_t units() const { return (N + images_per_gemm - 1) / images_per_gemm; }
};

// input [N, C, H, W], weight [K, C / G, R, S] and out [N, K, P, Q], or their gradients. `fold`: whether
// to fold images into one GEMM where they are small (Note [Folding images into one GEMM]).
ConvGeometry geometry_of(const Tensor& input, const Tensor& weight, const Tensor& out, const Conv2dParams& params,
                         const Tensor& written, bool fold) {
  SG_CHECK(written.is_contiguous(), "conv2d: the kernel writes contiguous outputs, got strides ",
           shape_str(written.strides()));
  ConvGeometry g{input.size(0),
                 input.size(1),
                 input.size(2),
                 input.size(3),
                 weight.size(0),
                 out.size(2),
                 out.size(3),
                 weight.size(2),
                 weight.size(3),
                 params.groups,
                 params,
                 0,
                 1};
  const int64_t row_bytes = g.C * g.R * g.S * g.Q * static_cast<int64_t>(written.element_size());  // col per output row
  g.band_rows = g.col_is_image() ? g.P : std::clamp<int64_t>(kColBandBytes / std::max<int64_t>(row_bytes, 1), 1, g.P);
  if (fold && g.band_rows == g.P && g.P * g.Q > 0 && g.P * g.Q <= kMaxFoldedPixels) {
    const int64_t wanted = (kGemmColumns + g.P * g.Q - 1) / (g.P * g.Q);
    g.images_per_gemm =
        std::max<int64_t>(1, std::min({wanted, g.N, kFoldedColBytes / std::max<int64_t>(row_bytes * g.P, 1)}));
  }
  return g;
}

// Calls unit_fn(unit) for the GEMMs of work item `item` (ConvGeometry::units()) in order: the bands of
// image `item`, or one unit of up to images_per_gemm images.
template <typename UnitFn>
void for_each_unit(const ConvGeometry& g, int64_t item, const UnitFn& unit_fn) {
  const int64_t n_begin = item * g.images_per_gemm, n_end = std::min(g.N, n_begin + g.images_per_gemm);
  if (g.images_per_gemm > 1) return unit_fn(Unit{n_begin, n_end, Band{0, g.P}});
  for (int64_t begin = 0; begin < g.P; begin += std::max<int64_t>(g.band_rows, 1))
    unit_fn(Unit{n_begin, n_end, Band{begin, std::min(g.P, begin + g.band_rows)}});
}

// Note [Unfolding a padded image]
// im2col reads the image through a copy whose zero border is written out (the padded image,
// [C, H + 2 padding.h, W + 2 padding.w]), so every tap is a plain read: a run of col is a strided copy
// of a padded row, with no bounds to test and no zeros to write. Runs are short (Q = 14 in the CNN's
// second layer), so what costs is the work per run, not per element. col2im is the mirror image: it
// adds the runs onto a zeroed padded gradient, whose interior is the image's gradient.

// Calls block(col_offset, padded_offset) for every kernel tap (c, r, s) of the first `channels`
// channels: row (c R + r) S + s of a col (rows `ld` apart) holds a run of Q entries per output row p of
// the band; run p reads row p stride.h + r dilation.h of channel c of the padded image from column
// s dilation.w on, every stride.w-th entry. So the band's i-th run starts padded_offset + i * row_step(g)
// into the padded image and col_offset + i Q into col.
template <typename Block>
void for_each_col_block(const ConvGeometry& g, int64_t channels, const Band& band, int64_t ld, const Block& block) {
  const Conv2dParams& at = g.params;
  const int64_t padded_h = g.padded_h(), padded_w = g.padded_w();
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t r = 0; r < g.R; ++r)
      for (int64_t s = 0; s < g.S; ++s)
        block(((c * g.R + r) * g.S + s) * ld,
              (c * padded_h + band.begin * at.stride.h + r * at.dilation.h) * padded_w + s * at.dilation.w);
}

int64_t row_step(const ConvGeometry& g) { return g.params.stride.h * g.padded_w(); }

// Copies a run of n contiguous elements 32 bytes at a time, the last 32 bytes overlapping the ones
// before: a run of 14 floats is then two vector moves, where a plain loop adds a 4-wide step and a
// scalar tail that cost more than the copy (fixed-size memcpy compiles to one move, not a call).
template <typename T>
void copy_run(T* target, const T* source, int64_t n) {
  constexpr int64_t chunk = 32 / sizeof(T);
  if (n < chunk) {
    for (int64_t i = 0; i < n; ++i) target[i] = source[i];
    return;
  }
  for (int64_t i = 0; i + chunk < n; i += chunk) std::memcpy(target + i, source + i, chunk * sizeof(T));
  std::memcpy(target + n - chunk, source + n - chunk, chunk * sizeof(T));
}

// Adds a run of n contiguous elements onto target: whole vectors, then a tail of fewer than a vector's
// elements as a fixed-length loop the compiler unrolls (a plain loop's 4-wide step and scalar tail
// cost more than the adds on runs this short).
template <typename T>
void add_run(T* target, const T* source, int64_t n) {
  constexpr int64_t chunk = 32 / sizeof(T);
  int64_t done = 0;
  for (; done + chunk <= n; done += chunk)
    for (int64_t i = 0; i < chunk; ++i) target[done + i] += source[done + i];
  for (int64_t i = 0; i < chunk - 1; ++i)
    if (done + i < n) target[done + i] += source[done + i];
}

// Unfolds the first `channels` channels of a padded image for a band into col, whose rows are `ld` apart.
template <typename T>
void im2col(const ConvGeometry& g, int64_t channels, const Band& band, const T* padded, T* col, int64_t ld) {
  const int64_t P = band.end - band.begin, Q = g.Q, step = row_step(g), stride_w = g.params.stride.w;
  for_each_col_block(g, channels, band, ld, [=](int64_t col_offset, int64_t padded_offset) {
    for (int64_t p = 0; p < P; ++p) {
      T* target = col + col_offset + p * Q;
      const T* source = padded + padded_offset + p * step;
      if (stride_w == 1) {
        copy_run(target, source, Q);
      } else {
        for (int64_t q = 0; q < Q; ++q) target[q] = source[q * stride_w];
      }
    }
  });
}

// Adds every entry of col (rows `ld` apart) onto the padded pixel it was unfolded from (padded starts
// zeroed).
template <typename T>
void col2im(const ConvGeometry& g, const Band& band, const T* col, int64_t ld, T* padded) {
  const int64_t P = band.end - band.begin, Q = g.Q, step = row_step(g), stride_w = g.params.stride.w;
  for_each_col_block(g, g.C, band, ld, [=](int64_t col_offset, int64_t padded_offset) {
    for (int64_t p = 0; p < P; ++p) {
      const T* source = col + col_offset + p * Q;
      T* target = padded + padded_offset + p * step;
      if (stride_w == 1) {
        add_run(target, source, Q);
      } else {
        for (int64_t q = 0; q < Q; ++q) target[q * stride_w] += source[q];
      }
    }
  });
}

// Copies the first `channels` channels of an image into the interior of padded, or (to_image) the
// interior of padded into the image. The border of padded is left as it is.
template <typename T>
void copy_interior(const ConvGeometry& g, int64_t channels, const T* from, T* to, bool to_image) {
  const int64_t padded_w = g.padded_w();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t h = 0; h < g.H; ++h) {
      const int64_t image_row = (c * g.H + h) * g.W;
      const int64_t padded_row = (c * g.padded_h() + h + g.params.padding.h) * padded_w + g.params.padding.w;
      if (to_image) std::copy(from + padded_row, from + padded_row + g.W, to + image_row);
      else std::copy(from + image_row, from + image_row + g.W, to + padded_row);
    }
  }
}

// The G matrices [rows, cols] stored one after the other from element `offset` of `base`, rows
// row_stride apart (a column range when row_stride > cols), as a [G, rows, cols] view (no copy): a
// group's slice of an image, of col or of the weight.
Tensor group_matrices(const Tensor& base, int64_t offset, int64_t groups, int64_t rows, int64_t cols,
                      int64_t row_stride) {
  return Tensor(std::make_shared<TensorImpl>(base.storage(), base.storage_offset() + offset, Shape{groups, rows, cols},
                                             Shape{rows * row_stride, row_stride, 1}, base.dtype()));
}
Tensor group_matrices(const Tensor& base, int64_t offset, int64_t groups, int64_t rows, int64_t cols) {
  return group_matrices(base, offset, groups, rows, cols, cols);
}

// A unit's columns of out (or its gradient) as [G, K/G, columns]: a view of out for one image, else
// the scratch's staging matrix (Note [Folding images into one GEMM]), which `restage` fills or empties.
Tensor unit_out(const ConvGeometry& g, const Tensor& out, const Unit& unit, const Tensor& scratch) {
  if (unit.images() == 1)
    return group_matrices(out, unit.n_begin * g.out_image_numel() + unit.band.begin * g.Q, g.G, g.K / g.G,
                          g.band_columns(unit.band), g.P * g.Q);
  return group_matrices(scratch, g.col_numel() + g.padded_numel(), g.G, g.K / g.G, g.columns(unit));
}

// Copies images [n_begin, n_end) of out (or its gradient, [N, K, P Q]) into the [K, images P Q]
// matrix `staged`, image after image (to_staged), or back.
template <typename T>
void restage(const ConvGeometry& g, int64_t n_begin, int64_t n_end, T* out, T* staged, bool to_staged) {
  const int64_t PQ = g.P * g.Q, ld = (n_end - n_begin) * PQ;
  for (int64_t n = n_begin; n < n_end; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      T* image_row = out + (n * g.K + k) * PQ;
      T* staged_row = staged + k * ld + (n - n_begin) * PQ;
      if (to_staged) std::copy(image_row, image_row + PQ, staged_row);
      else std::copy(staged_row, staged_row + PQ, image_row);
    }
}

template <typename T>
T* data_of(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// [G, rows, cols] -> [G, cols, rows] as a view; the GEMM reads it with BLAS's transpose flag.
Tensor transposed(const Tensor& matrices) {
  return Tensor(std::make_shared<TensorImpl>(
      matrices.storage(), matrices.storage_offset(), Shape{matrices.size(0), matrices.size(2), matrices.size(1)},
      Shape{matrices.stride(0), matrices.stride(2), matrices.stride(1)}, matrices.dtype()));
}

// Waking a thread costs a few microseconds (far more when the machine is busy): a worker gets at least
// this many multiply-adds, some 20 microseconds of GEMM.
constexpr int64_t kWorkPerWorker = int64_t(1) << 20;

// Runs item(i, buffer) for every i < count, the items split evenly across up to get_num_threads()
// workers (Note [Parallel over images]), as many as give each kWorkPerWorker of the items' work (in
// multiply-adds). Each worker has its own zeroed scratch buffer of buffer_numel elements, allocated
// here, before the parallel region, where nothing may throw. `single_threaded_gemms`: the items run
// inside a parallel region even when one worker takes them all, so that OpenBLAS never splits one of
// their GEMMs across threads, which changes its bits (Note [Deterministic weight gradient]).
void for_each_with_buffer(int64_t count, int64_t work_per_item, int64_t buffer_numel, DType dtype,
                          const std::function<void(int64_t, const Tensor&)>& item, bool single_threaded_gemms = false) {
  const int64_t workers = std::clamp<int64_t>(count * work_per_item / kWorkPerWorker, std::min<int64_t>(count, 1),
                                              std::min<int64_t>(get_num_threads(), count));
  std::vector<Tensor> buffers;
  for (int64_t w = 0; w < workers; ++w) buffers.push_back(zeros({buffer_numel}, {dtype}));
  const int64_t region = single_threaded_gemms ? std::max<int64_t>(workers, std::min(get_num_threads(), 2)) : workers;
  parallel_for(region, 1, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < std::min(end, workers); ++w)
      for (int64_t i = w * count / workers; i < (w + 1) * count / workers; ++i) item(i, buffers[w]);
  });
}

// The unit's col [G, C/G R S, columns]: image n's own columns for a pointwise kernel, else its images
// unfolded side by side into the scratch buffer. With padding, an image is first copied into the
// scratch's padded image, whose border stays zero (only the interior is ever written), when its first
// band is unfolded; its later bands, on the same worker, reuse that copy.
template <typename T>
Tensor unit_col(const ConvGeometry& g, const Tensor& input, const Unit& unit, const Tensor& scratch) {
  const int64_t columns = g.columns(unit), band_columns = g.band_columns(unit.band);
  if (g.col_is_image() && unit.images() == 1)
    return group_matrices(input, unit.n_begin * g.image_numel() + unit.band.begin * g.Q, g.G, g.group_rows(), columns,
                          g.P * g.Q);
  T* col = data_of<T>(scratch);
  for (int64_t n = unit.n_begin; n < unit.n_end; ++n) {
    const T* source = data_of<T>(input) + n * g.image_numel();
    if (g.has_padding()) {
      T* padded = col + g.col_numel();
      if (unit.band.begin == 0) copy_interior(g, g.C, source, padded, /*to_image=*/false);
      source = padded;
    }
    im2col(g, g.C, unit.band, source, col + (n - unit.n_begin) * band_columns, columns);
  }
  return group_matrices(scratch, 0, g.G, g.group_rows(), columns);
}

template <typename T>
void conv2d_typed(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const ConvGeometry& g) {
  const Tensor weights = group_matrices(weight, 0, g.G, g.K / g.G, g.group_rows());
  const T* bias_data = bias.defined() ? data_of<T>(bias) : nullptr;
  for_each_with_buffer(g.units(), g.images_per_gemm * g.image_work(), g.scratch_numel(), out.dtype(),
                       [&](int64_t item, const Tensor& scratch) {
                         for_each_unit(g, item, [&](const Unit& unit) {
                           // The bias is written first and the product added onto it (beta = 1): no second pass over
                           // out.
                           const Tensor sums = unit_out(g, out, unit, scratch);
                           if (bias_data != nullptr)
                             for (int64_t k = 0; k < g.K; ++k) {
                               T* row = data_of<T>(sums) + k * sums.stride(1);
                               std::fill(row, row + sums.size(2), bias_data[k]);
                             }
                           gemm(sums, weights, unit_col<T>(g, input, unit, scratch), 1.0,
                                bias_data != nullptr ? 1.0 : 0.0);
                           if (unit.images() > 1)
                             restage(g, unit.n_begin, unit.n_end, data_of<T>(out), data_of<T>(sums), false);
                         });
                       });
}

template <typename T>
void conv2d_grad_input_typed(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                             const ConvGeometry& g) {
  const Tensor weights_t = transposed(group_matrices(weight, 0, g.G, g.K / g.G, g.group_rows()));
  const int64_t work = g.images_per_gemm * g.image_work();
  for_each_with_buffer(
      g.units(), work, g.scratch_numel(), grad_input.dtype(), [&](int64_t item, const Tensor& scratch) {
        for_each_unit(g, item, [&](const Unit& unit) {
          const Tensor grad_sums = unit_out(g, grad_out, unit, scratch);
          if (unit.images() > 1)
            restage(g, unit.n_begin, unit.n_end, data_of<T>(grad_out), data_of<T>(grad_sums), /*to_staged=*/true);
          if (g.col_is_image() && unit.images() == 1) {  // d col is d image
            return gemm(group_matrices(grad_input, unit.n_begin * g.image_numel() + unit.band.begin * g.Q, g.G,
                                       g.group_rows(), g.columns(unit), g.P * g.Q),
                        weights_t, grad_sums, 1.0, 0.0);
          }
          const int64_t columns = g.columns(unit);
          gemm(group_matrices(scratch, 0, g.G, g.group_rows(), columns), weights_t, grad_sums, 1.0, 0.0);
          // Each image's gradient is summed from its columns of d col, into the padded gradient (zeroed at
          // the image's first band, copied out at its last) or, without padding, into the image itself.
          for (int64_t n = unit.n_begin; n < unit.n_end; ++n) {
            T* image = data_of<T>(grad_input) + n * g.image_numel();
            T* padded = g.has_padding() ? data_of<T>(scratch) + g.col_numel() : image;
            if (unit.band.begin == 0)
              std::fill(padded, padded + (g.has_padding() ? g.padded_numel() : g.image_numel()), T(0));
            col2im(g, unit.band, data_of<T>(scratch) + (n - unit.n_begin) * g.band_columns(unit.band), columns, padded);
            if (g.has_padding() && unit.band.end == g.P) copy_interior(g, g.C, padded, image, /*to_image=*/true);
          }
        });
      });
}

// Note [Weight gradient over the whole batch]
// Where images are folded (Note [Folding images into one GEMM]), the weight gradient is one product
// over the whole batch, d weight[g] = grad_out[g] [K/G, N P Q] @ col[g]^T [N P Q, C/G R S], its inner
// dimension every image's columns side by side. Its work is split not over images (that would mean a
// partial gradient per block, each as large as the weight, added up after) but over the weight's
// columns: chunks of input channels, kChannelChunks per group at offsets fixed by the shape, each at
// least kMinChunkColumns columns of d weight (a 1x1 kernel's chunk of 8 channels made the GEMM 8
// columns wide and the downsamples' weight gradients 1.6x slower than the reference). A chunk
// unfolds only its channels of every image into its own col, and its GEMM writes its own columns of
// d weight, once, from the whole batch's staged grad_out (gathered once, shared). Each sum is then one
// GEMM's, in an order fixed by the shapes; the GEMMs run one per thread (single_threaded_gemms), so
// the result is bit-identical on any thread count.
constexpr int64_t kChannelChunks = 8;
constexpr int64_t kMinChunkColumns = 64;

template <typename T>
void conv2d_grad_weight_batch(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                              const ConvGeometry& g) {
  const int64_t PQ = g.P * g.Q, columns = g.N * PQ, Cg = g.C / g.G, Kg = g.K / g.G;
  const Tensor staged = empty({g.K * columns}, {grad_weight.dtype()});
  restage(g, 0, g.N, data_of<T>(grad_out), data_of<T>(staged), /*to_staged=*/true);
  const int64_t chunk =
      std::max((Cg + kChannelChunks - 1) / kChannelChunks, (kMinChunkColumns + g.R * g.S - 1) / (g.R * g.S));
  const int64_t chunks = (Cg + chunk - 1) / chunk;
  const int64_t col_numel = chunk * g.R * g.S * columns;
  const int64_t scratch_numel = col_numel + (g.has_padding() ? chunk * g.padded_channel_numel() : 0);
  for_each_with_buffer(
      g.G * chunks, Kg * chunk * g.R * g.S * columns, scratch_numel, grad_weight.dtype(),
      [&](int64_t item, const Tensor& scratch) {
        const int64_t group = item / chunks, c_begin = item % chunks * chunk, channels = std::min(chunk, Cg - c_begin);
        T* col = data_of<T>(scratch);
        for (int64_t n = 0; n < g.N; ++n) {
          const T* source = data_of<T>(input) + n * g.image_numel() + (group * Cg + c_begin) * g.H * g.W;
          if (g.has_padding()) {
            copy_interior(g, channels, source, col + col_numel, /*to_image=*/false);
            source = col + col_numel;
          }
          im2col(g, channels, Band{0, g.P}, source, col + n * PQ, columns);
        }
        const int64_t tap_columns = channels * g.R * g.S;
        gemm(group_matrices(grad_weight, group * Kg * g.group_rows() + c_begin * g.R * g.S, 1, Kg, tap_columns,
                            g.group_rows()),
             group_matrices(staged, group * Kg * columns, 1, Kg, columns),
             transposed(group_matrices(scratch, 0, 1, tap_columns, columns)), 1.0, 0.0);
      },
      /*single_threaded_gemms=*/true);
}

template <typename T>
void conv2d_grad_weight_typed(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                              const ConvGeometry& g) {
  if (g.images_per_gemm > 1) return conv2d_grad_weight_batch<T>(grad_weight, grad_out, input, g);
  const int64_t blocks = (g.N + kImagesPerBlock - 1) / kImagesPerBlock;
  const int64_t weight_numel = grad_weight.numel();
  // Block 0 sums straight into grad_weight; every other block into its own row of `partials`.
  const Tensor partials = empty({std::max<int64_t>(blocks - 1, 0), weight_numel}, {grad_weight.dtype()});
  const int64_t block_work = kImagesPerBlock * g.image_work();
  for_each_with_buffer(
      blocks, block_work, g.scratch_numel(), grad_weight.dtype(), [&](int64_t block, const Tensor& scratch) {
        const Tensor sums = block == 0
                                ? group_matrices(grad_weight, 0, g.G, g.K / g.G, g.group_rows())
                                : group_matrices(partials, (block - 1) * weight_numel, g.G, g.K / g.G, g.group_rows());
        double beta = 0.0;  // the block's first product overwrites sums, the others add onto it
        for (int64_t n = block * kImagesPerBlock; n < std::min(g.N, (block + 1) * kImagesPerBlock); ++n) {
          for_each_unit(g, n, [&](const Unit& unit) {
            gemm(sums, unit_out(g, grad_out, unit, scratch), transposed(unit_col<T>(g, input, unit, scratch)), 1.0,
                 beta);
            beta = 1.0;
          });
        }
      });
  T* total = data_of<T>(grad_weight);
  const T* partial_data = data_of<T>(partials);
  parallel_for(weight_numel, kParallelGrain, [&](int64_t begin, int64_t end) {
    for (int64_t block = 1; block < blocks; ++block) {
      const T* partial = partial_data + (block - 1) * weight_numel;
      for (int64_t i = begin; i < end; ++i) total[i] += partial[i];
    }
  });
}

// Calls fn.template operator()<T>() with T the BLAS type of `dtype` (f32 or f64).
template <typename Fn>
void dispatch_blas(DType dtype, const Fn& fn) {
  if (dtype == DType::f32) fn.template operator()<float>();
  else fn.template operator()<double>();
}

// The im2col + GEMM convolutions of f32 or f64 tensors; `fold`: Note [Folding images into one GEMM].
void conv2d_im2col(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const Conv2dParams& params, bool fold) {
  const ConvGeometry g = geometry_of(input, weight, out, params, out, fold);
  const Tensor input_data = kernels::contiguous(input), weight_data = kernels::contiguous(weight);
  const Tensor bias_data = bias.defined() ? kernels::contiguous(bias) : Tensor();
  dispatch_blas(out.dtype(), [&]<typename T>() { conv2d_typed<T>(out, input_data, weight_data, bias_data, g); });
}

void conv2d_grad_input_im2col(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                              const Conv2dParams& params, bool fold) {
  const ConvGeometry g = geometry_of(grad_input, weight, grad_out, params, grad_input, fold);
  const Tensor grad_out_data = kernels::contiguous(grad_out), weight_data = kernels::contiguous(weight);
  dispatch_blas(grad_input.dtype(),
                [&]<typename T>() { conv2d_grad_input_typed<T>(grad_input, grad_out_data, weight_data, g); });
}

void conv2d_grad_weight_im2col(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                               const Conv2dParams& params, bool fold) {
  const ConvGeometry g = geometry_of(input, grad_weight, grad_out, params, grad_weight, fold);
  if (g.N == 0) return kernels::fill(grad_weight, 0.0);  // an empty sum
  const Tensor grad_out_data = kernels::contiguous(grad_out), input_data = kernels::contiguous(input);
  dispatch_blas(grad_weight.dtype(),
                [&]<typename T>() { conv2d_grad_weight_typed<T>(grad_weight, grad_out_data, input_data, g); });
}

bool is_blas_dtype(DType dtype) { return dtype == DType::f32 || dtype == DType::f64; }

// Runs compute(out, inputs) in a BLAS dtype. The GEMM computes f16 and bf16 in f32 anyway, so the whole
// convolution does: their inputs are widened once and the result rounded once into `out`.
void in_blas_dtype(const Tensor& out, const TensorList& inputs,
                   const std::function<void(const Tensor&, const TensorList&)>& compute) {
  if (is_blas_dtype(out.dtype())) return compute(out, inputs);
  Tensor result = empty(out.sizes(), {DType::f32, out.device()});
  TensorList widened;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      widened.emplace_back();
      continue;
    }
    widened.push_back(empty(t.sizes(), {DType::f32, t.device()}));
    kernels::copy(widened.back(), t);
  }
  compute(result, widened);
  kernels::copy(out, result);
}

}  // namespace

// Note [Which convolution runs]
// An f32 pass runs on oneDNN's blocked direct kernels where they beat im2col + GEMM (Note [When oneDNN
// runs] in core/cpu/conv_onednn.cpp: up to 1.6x on the CNN's and ResNet's layers, docs/performance.md);
// f16 and bf16 are widened to f32 and take the same path; f64, and the f32 passes oneDNN declines, run
// on im2col + GEMM, small images folded several to a GEMM (Note [Folding images into one GEMM]). The
// *_reference functions run im2col + GEMM one image per GEMM, the oracle tests/test_conv.cpp holds
// both fast paths to.
void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
            const Conv2dParams& params) {
  in_blas_dtype(out, {input, weight, bias}, [&](const Tensor& result, const TensorList& in) {
    if (!onednn::try_conv2d(result, in[0], in[1], in[2], params))
      conv2d_im2col(result, in[0], in[1], in[2], params, true);
  });
}

void conv2d_grad_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                       const Conv2dParams& params) {
  in_blas_dtype(grad_input, {grad_out, weight}, [&](const Tensor& result, const TensorList& in) {
    if (!onednn::try_conv2d_grad_input(result, in[0], in[1], params))
      conv2d_grad_input_im2col(result, in[0], in[1], params, true);
  });
}

void conv2d_grad_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                        const Conv2dParams& params) {
  in_blas_dtype(grad_weight, {grad_out, input}, [&](const Tensor& result, const TensorList& in) {
    if (!onednn::try_conv2d_grad_weight(result, in[0], in[1], params))
      conv2d_grad_weight_im2col(result, in[0], in[1], params, true);
  });
}

void conv2d_reference(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Conv2dParams& params) {
  in_blas_dtype(out, {input, weight, bias}, [&](const Tensor& result, const TensorList& in) {
    conv2d_im2col(result, in[0], in[1], in[2], params, false);
  });
}

void conv2d_grad_input_reference(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                                 const Conv2dParams& params) {
  in_blas_dtype(grad_input, {grad_out, weight}, [&](const Tensor& result, const TensorList& in) {
    conv2d_grad_input_im2col(result, in[0], in[1], params, false);
  });
}

void conv2d_grad_weight_reference(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                                  const Conv2dParams& params) {
  in_blas_dtype(grad_weight, {grad_out, input}, [&](const Tensor& result, const TensorList& in) {
    conv2d_grad_weight_im2col(result, in[0], in[1], params, false);
  });
}

std::string conv2d_implementation(ConvPass pass, const Shape& input, const Shape& weight, DType dtype,
                                  const Conv2dParams& params) {
  const DType computed = is_blas_dtype(dtype) ? dtype : DType::f32;  // in_blas_dtype
  const std::string onednn_name = onednn::implementation(pass, input, weight, computed, params);
  return onednn_name.empty() ? "im2col + GEMM" : "oneDNN " + onednn_name;
}

}  // namespace sg::cpu
