// CPU convolution: the entry points, which run f32 on oneDNN where it can (Note [Which convolution
// runs], core/cpu/conv_onednn.cpp), and the reference they fall back on and are tested against:
// im2col + one GEMM per image, images split across threads.
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
// [N, K, P Q]. bench/conv.cpp measures the convolutions as they are.
//
// Note [Deterministic weight gradient]
// d weight sums over the images. The batch is cut into blocks of kImagesPerBlock images at fixed
// offsets, whatever the thread count; a block accumulates its images in order (GEMMs with beta = 1)
// and the blocks' sums are then added in block order. The additions, and so the rounding, are the
// same on 1 thread as on 16, so the gradient is bit-identical. (Within an image, the products of its
// bands of output rows, Note [Bands of output rows], are added in band order.)
#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "core/cpu/conv_onednn.h"
#include "core/factory.h"
#include "core/kernels/conv.h"
#include "core/kernels/gemm.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"  // defines: cpu::contiguous_data
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

struct ConvGeometry {
  int64_t N, C, H, W, K, P, Q, R, S, G;
  Conv2dParams params;
  int64_t band_rows;  // output rows per band (Note [Bands of output rows])

  int64_t group_rows() const { return C / G * R * S; }  // rows of a group's col = columns of its weight
  int64_t image_numel() const { return C * H * W; }
  int64_t out_image_numel() const { return K * P * Q; }
  int64_t padded_h() const { return H + 2 * params.padding.h; }
  int64_t padded_w() const { return W + 2 * params.padding.w; }
  bool has_padding() const { return params.padding != Size2(0); }
  bool col_is_image() const {  // Note [Convolution as GEMM]: a pointwise kernel needs no unfolding
    return R == 1 && S == 1 && params.stride == Size2(1) && !has_padding();
  }
  int64_t band_columns(const Band& band) const { return (band.end - band.begin) * Q; }
  // A worker's scratch: col for one band [C R S, band_rows Q], then the padded image
  // [C, padded_h, padded_w] when there is padding.
  int64_t col_numel() const { return C * R * S * band_rows * Q; }
  int64_t padded_numel() const { return has_padding() ? C * padded_h() * padded_w() : 0; }
  int64_t scratch_numel() const { return col_is_image() ? 0 : col_numel() + padded_numel(); }
  int64_t image_work() const { return out_image_numel() * group_rows(); }  // multiply-adds of one image's product
};

// input [N, C, H, W], weight [K, C / G, R, S] and out [N, K, P, Q], or their gradients.
ConvGeometry geometry_of(const Tensor& input, const Tensor& weight, const Tensor& out, const Conv2dParams& params,
                         const Tensor& written) {
  SG_CHECK(written.is_contiguous(), "conv2d: the kernel writes contiguous outputs, got strides ",
           shape_str(written.strides()));
  ConvGeometry g{input.size(0), input.size(1),  input.size(2),  input.size(3), weight.size(0), out.size(2),
                 out.size(3),   weight.size(2), weight.size(3), params.groups, params,         0};
  const int64_t row_bytes = g.C * g.R * g.S * g.Q * static_cast<int64_t>(written.element_size());  // col per output row
  g.band_rows = g.col_is_image() ? g.P : std::clamp<int64_t>(kColBandBytes / std::max<int64_t>(row_bytes, 1), 1, g.P);
  return g;
}

// Calls band_fn(band) for the bands of one image's output rows, in order.
template <typename BandFn>
void for_each_band(const ConvGeometry& g, const BandFn& band_fn) {
  for (int64_t begin = 0; begin < g.P; begin += std::max<int64_t>(g.band_rows, 1))
    band_fn(Band{begin, std::min(g.P, begin + g.band_rows)});
}

// Note [Unfolding a padded image]
// im2col reads the image through a copy whose zero border is written out (the padded image,
// [C, H + 2 padding.h, W + 2 padding.w]), so every tap is a plain read: a run of col is a strided copy
// of a padded row, with no bounds to test and no zeros to write. Runs are short (Q = 14 in the CNN's
// second layer), so what costs is the work per run, not per element. col2im is the mirror image: it
// adds the runs onto a zeroed padded gradient, whose interior is the image's gradient.

// Calls block(col_offset, padded_offset) for every kernel tap (c, r, s): row (c R + r) S + s of a band's
// col holds a run of Q entries per output row p of the band; run p reads row p stride.h + r dilation.h
// of channel c of the padded image from column s dilation.w on, every stride.w-th entry. So the band's
// i-th run starts padded_offset + i * row_step(g) into the padded image and col_offset + i Q into col.
template <typename Block>
void for_each_col_block(const ConvGeometry& g, const Band& band, const Block& block) {
  const Conv2dParams& at = g.params;
  const int64_t padded_h = g.padded_h(), padded_w = g.padded_w(), columns = g.band_columns(band);
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t r = 0; r < g.R; ++r)
      for (int64_t s = 0; s < g.S; ++s)
        block(((c * g.R + r) * g.S + s) * columns,
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

template <typename T>
void im2col(const ConvGeometry& g, const Band& band, const T* padded, T* col) {
  const int64_t P = band.end - band.begin, Q = g.Q, step = row_step(g), stride_w = g.params.stride.w;
  for_each_col_block(g, band, [=](int64_t col_offset, int64_t padded_offset) {
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

// Adds every entry of col onto the padded pixel it was unfolded from (padded starts zeroed).
template <typename T>
void col2im(const ConvGeometry& g, const Band& band, const T* col, T* padded) {
  const int64_t P = band.end - band.begin, Q = g.Q, step = row_step(g), stride_w = g.params.stride.w;
  for_each_col_block(g, band, [=](int64_t col_offset, int64_t padded_offset) {
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

// Copies the image into the interior of padded, or (to_image) the interior of padded into the image.
// The border of padded is left as it is.
template <typename T>
void copy_interior(const ConvGeometry& g, const T* from, T* to, bool to_image) {
  const int64_t padded_w = g.padded_w();
  for (int64_t c = 0; c < g.C; ++c) {
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

// A band's columns of image n of out (or its gradient), [G, K/G, band columns].
Tensor out_band(const ConvGeometry& g, const Tensor& out, int64_t n, const Band& band) {
  return group_matrices(out, n * g.out_image_numel() + band.begin * g.Q, g.G, g.K / g.G, g.band_columns(band),
                        g.P * g.Q);
}

// A band's columns of image n of the input (or its gradient) as [G, C/G, band columns]: its col when
// the kernel is pointwise (then P Q = H W).
Tensor image_band(const ConvGeometry& g, const Tensor& input, int64_t n, const Band& band) {
  return group_matrices(input, n * g.image_numel() + band.begin * g.Q, g.G, g.group_rows(), g.band_columns(band),
                        g.P * g.Q);
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
// here, before the parallel region, where nothing may throw.
void for_each_with_buffer(int64_t count, int64_t work_per_item, int64_t buffer_numel, DType dtype,
                          const std::function<void(int64_t, const Tensor&)>& item) {
  const int64_t workers = std::clamp<int64_t>(count * work_per_item / kWorkPerWorker, std::min<int64_t>(count, 1),
                                              std::min<int64_t>(get_num_threads(), count));
  std::vector<Tensor> buffers;
  for (int64_t w = 0; w < workers; ++w) buffers.push_back(zeros({buffer_numel}, {dtype}));
  parallel_for(workers, 1, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w)
      for (int64_t i = w * count / workers; i < (w + 1) * count / workers; ++i) item(i, buffers[w]);
  });
}

// What im2col reads for image n: the image itself, or with padding its copy into the scratch's
// padded image, whose border stays zero (only the interior is ever written).
template <typename T>
const T* unfold_source(const ConvGeometry& g, const Tensor& input, int64_t n, const Tensor& scratch) {
  const T* image = static_cast<const T*>(input.raw_data()) + n * g.image_numel();
  if (!g.has_padding()) return image;
  T* padded = static_cast<T*>(scratch.raw_data()) + g.col_numel();
  copy_interior(g, image, padded, /*to_image=*/false);
  return padded;
}

// The [G, C/G R S, band columns] col of a band of image n: the image's own columns for a pointwise
// kernel, else unfolded from `source` (unfold_source) into the scratch buffer.
template <typename T>
Tensor band_col(const ConvGeometry& g, const Tensor& input, int64_t n, const T* source, const Band& band,
                const Tensor& scratch) {
  if (g.col_is_image()) return image_band(g, input, n, band);
  im2col(g, band, source, static_cast<T*>(scratch.raw_data()));
  return group_matrices(scratch, 0, g.G, g.group_rows(), g.band_columns(band));
}

template <typename T>
void conv2d_typed(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const ConvGeometry& g) {
  const Tensor weights = group_matrices(weight, 0, g.G, g.K / g.G, g.group_rows());
  const T* bias_data = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
  T* out_data = static_cast<T*>(out.raw_data());
  const int64_t PQ = g.P * g.Q;
  for_each_with_buffer(g.N, g.image_work(), g.scratch_numel(), out.dtype(), [&](int64_t n, const Tensor& scratch) {
    // The bias is written first and the product added onto it (beta = 1): no second pass over out.
    T* out_image = out_data + n * g.out_image_numel();
    if (bias_data != nullptr)
      for (int64_t k = 0; k < g.K; ++k) std::fill(out_image + k * PQ, out_image + (k + 1) * PQ, bias_data[k]);
    const T* source = unfold_source<T>(g, input, n, scratch);
    for_each_band(g, [&](const Band& band) {
      gemm(out_band(g, out, n, band), weights, band_col<T>(g, input, n, source, band, scratch), 1.0,
           bias_data != nullptr ? 1.0 : 0.0);
    });
  });
}

template <typename T>
void conv2d_grad_input_typed(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                             const ConvGeometry& g) {
  const Tensor weights_t = transposed(group_matrices(weight, 0, g.G, g.K / g.G, g.group_rows()));
  T* grad_input_data = static_cast<T*>(grad_input.raw_data());
  const DType dtype = grad_input.dtype();
  for_each_with_buffer(g.N, g.image_work(), g.scratch_numel(), dtype, [&](int64_t n, const Tensor& scratch) {
    if (g.col_is_image()) {  // d col is d image
      for_each_band(g, [&](const Band& band) {
        gemm(image_band(g, grad_input, n, band), weights_t, out_band(g, grad_out, n, band), 1.0, 0.0);
      });
      return;
    }
    T* col = static_cast<T*>(scratch.raw_data());
    T* image = grad_input_data + n * g.image_numel();
    T* padded = g.has_padding() ? col + g.col_numel() : image;
    std::fill(padded, padded + (g.has_padding() ? g.padded_numel() : g.image_numel()), T(0));
    for_each_band(g, [&](const Band& band) {
      gemm(group_matrices(scratch, 0, g.G, g.group_rows(), g.band_columns(band)), weights_t,
           out_band(g, grad_out, n, band), 1.0, 0.0);
      col2im(g, band, col, padded);
    });
    if (g.has_padding()) copy_interior(g, padded, image, /*to_image=*/true);
  });
}

template <typename T>
void conv2d_grad_weight_typed(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                              const ConvGeometry& g) {
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
          const T* source = unfold_source<T>(g, input, n, scratch);
          for_each_band(g, [&](const Band& band) {
            gemm(sums, out_band(g, grad_out, n, band), transposed(band_col<T>(g, input, n, source, band, scratch)), 1.0,
                 beta);
            beta = 1.0;
          });
        }
      });
  T* total = static_cast<T*>(grad_weight.raw_data());
  const T* partial_data = static_cast<const T*>(partials.raw_data());
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

// The im2col + GEMM convolutions of f32 or f64 tensors.
void conv2d_im2col(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const Conv2dParams& params) {
  const ConvGeometry g = geometry_of(input, weight, out, params, out);
  const Tensor input_data = kernels::contiguous(input), weight_data = kernels::contiguous(weight);
  const Tensor bias_data = bias.defined() ? kernels::contiguous(bias) : Tensor();
  dispatch_blas(out.dtype(), [&]<typename T>() { conv2d_typed<T>(out, input_data, weight_data, bias_data, g); });
}

void conv2d_grad_input_im2col(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                              const Conv2dParams& params) {
  const ConvGeometry g = geometry_of(grad_input, weight, grad_out, params, grad_input);
  const Tensor grad_out_data = kernels::contiguous(grad_out), weight_data = kernels::contiguous(weight);
  dispatch_blas(grad_input.dtype(),
                [&]<typename T>() { conv2d_grad_input_typed<T>(grad_input, grad_out_data, weight_data, g); });
}

void conv2d_grad_weight_im2col(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                               const Conv2dParams& params) {
  const ConvGeometry g = geometry_of(input, grad_weight, grad_out, params, grad_weight);
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
// on im2col + GEMM.
void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
            const Conv2dParams& params) {
  in_blas_dtype(out, {input, weight, bias}, [&](const Tensor& result, const TensorList& in) {
    if (!onednn::try_conv2d(result, in[0], in[1], in[2], params)) conv2d_im2col(result, in[0], in[1], in[2], params);
  });
}

void conv2d_grad_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                       const Conv2dParams& params) {
  in_blas_dtype(grad_input, {grad_out, weight}, [&](const Tensor& result, const TensorList& in) {
    if (!onednn::try_conv2d_grad_input(result, in[0], in[1], params))
      conv2d_grad_input_im2col(result, in[0], in[1], params);
  });
}

void conv2d_grad_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                        const Conv2dParams& params) {
  in_blas_dtype(grad_weight, {grad_out, input}, [&](const Tensor& result, const TensorList& in) {
    if (!onednn::try_conv2d_grad_weight(result, in[0], in[1], params))
      conv2d_grad_weight_im2col(result, in[0], in[1], params);
  });
}

void conv2d_reference(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Conv2dParams& params) {
  in_blas_dtype(out, {input, weight, bias}, [&](const Tensor& result, const TensorList& in) {
    conv2d_im2col(result, in[0], in[1], in[2], params);
  });
}

void conv2d_grad_input_reference(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                                 const Conv2dParams& params) {
  in_blas_dtype(grad_input, {grad_out, weight}, [&](const Tensor& result, const TensorList& in) {
    conv2d_grad_input_im2col(result, in[0], in[1], params);
  });
}

void conv2d_grad_weight_reference(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                                  const Conv2dParams& params) {
  in_blas_dtype(grad_weight, {grad_out, input}, [&](const Tensor& result, const TensorList& in) {
    conv2d_grad_weight_im2col(result, in[0], in[1], params);
  });
}

std::string conv2d_implementation(ConvPass pass, const Shape& input, const Shape& weight, DType dtype,
                                  const Conv2dParams& params) {
  const DType computed = is_blas_dtype(dtype) ? dtype : DType::f32;  // in_blas_dtype
  const std::string onednn_name = onednn::implementation(pass, input, weight, computed, params);
  return onednn_name.empty() ? "im2col + GEMM" : "oneDNN " + onednn_name;
}

}  // namespace sg::cpu
