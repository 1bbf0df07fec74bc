#include "dist/powersgd_hook.h"

#include <algorithm>
#include <map>
#include <memory>

#include "autograd/grad_mode.h"
#include "autograd/ops_index.h"
#include "autograd/ops_linalg.h"
#include "core/factory.h"
#include "core/generator.h"
#include "dist/default_hooks.h"

namespace sg::dist {

namespace {

// Gram-Schmidt on the columns of `p` ([n, r]), in place (PyTorch's _orthogonalize with epsilon
// 0, except that a zero column stays zero rather than becoming NaN: a zero gradient then comes
// out as zero).
void orthogonalize(const Tensor& p) {
  for (int64_t i = 0; i < p.size(1); ++i) {
    Tensor column = p.narrow(1, i, 1);
    const double length = column.norm().item();
    if (length > 0) column.div_(length);
    for (int64_t j = i + 1; j < p.size(1); ++j) {
      Tensor later = p.narrow(1, j, 1);
      later.sub_(column * (column * later).sum().item());
    }
  }
}

// One bucket's compressed gradients: each as a matrix view into the bucket, with its factors.
struct Factors {
  Tensor matrix, p, q;
};

class PowerSGD {
public:
  explicit PowerSGD(PowerSGDOptions options) : options_(options), generator_(options.random_seed) {
    SG_CHECK(options_.matrix_approximation_rank >= 1,
             "powerSGD_hook: matrix_approximation_rank must be at least 1, got ", options_.matrix_approximation_rank);
  }

  WorkPtr operator()(ProcessGroup& group, GradBucket& bucket) {
    if (iteration_ < options_.start_powerSGD_iter) {
      if (bucket.is_last()) ++iteration_;
      return allreduce_hook(group, bucket);
    }
    SG_CHECK(bucket.buffer().dtype() == DType::f32 || bucket.buffer().dtype() == DType::f64,
             "powerSGD_hook compresses f32 and f64 gradients; bucket ", bucket.index(), " holds ",
             bucket.buffer().dtype());
    NoGradGuard no_grad;
    Tensor buffer = bucket.buffer();
    Tensor local;  // this rank's gradients plus the error carried over, before the approximation
    if (options_.use_error_feedback) {
      Tensor& error = errors_[bucket.index()];
      if (error.defined()) buffer.add_(error);
      local = buffer.clone();
    }
    // The gradients averaged exactly travel together, flattened; each compressed one as P.
    TensorList exact;
    std::vector<Factors>& factors = factors_of(bucket);
    for (const Tensor& gradient : bucket.gradients())
      if (!compressed(gradient)) exact.push_back(gradient.reshape({-1}));
    Tensor exact_flat = exact.empty() ? Tensor() : cat(exact);
    WorkPtr exact_sum = exact.empty() ? nullptr : group.all_reduce(exact_flat, ReduceOp::SUM);
    TensorList ps;
    for (Factors& f : factors) {
      if (!options_.warm_start) f.q = random_q(f.q.sizes(), f.q);
      ps.push_back(mm(f.matrix, f.q).reshape({-1}));
    }
    Tensor p_flat = ps.empty() ? Tensor() : cat(ps);
    WorkPtr p_sum = ps.empty() ? nullptr : group.all_reduce(p_flat, ReduceOp::SUM);
    const int world = group.size();
    const bool last = bucket.is_last();
    // The rest needs the summed P first: it runs in wait(), at the end of backward, where every
    // rank waits for the buckets in the same order, so the Q all-reduces it issues line up too.
    // (A bucket holds at least one gradient, so one of the two all-reduces was started.)
    return then(p_sum ? p_sum : exact_sum, [this, &group, exact, exact_flat, exact_sum, p_flat, p_sum, buffer, local,
                                            last, index = bucket.index(), world]() mutable {
      NoGradGuard no_grad;
      if (exact_sum) {
        exact_sum->wait();
        int64_t offset = 0;
        for (Tensor& gradient : exact) {
          gradient.copy_(exact_flat.narrow(0, offset, gradient.numel()) / static_cast<double>(world));
          offset += gradient.numel();
        }
      }
      if (p_sum) finish_compressed(group, index, p_flat, world);
      if (local.defined()) errors_[index] = local - buffer;
      if (last) ++iteration_;
    });
  }

private:
  bool compressed(const Tensor& gradient) const {
    if (gradient.dim() <= 1) return false;
    const int64_t n = gradient.size(0), m = gradient.numel() / n;
    const int64_t r = std::min<int64_t>({options_.matrix_approximation_rank, n, m});
    return static_cast<double>((n + m) * r) * options_.min_compression_rate < static_cast<double>(n * m);
  }

  // The matrices of a bucket's compressed gradients, with Q drawn the first time (from the
  // shared seed, in bucket order: the same on every rank).
  std::vector<Factors>& factors_of(const GradBucket& bucket) {
    auto [entry, fresh] = factors_.try_emplace(bucket.index());
    if (fresh)
      for (const Tensor& gradient : bucket.gradients()) {
        if (!compressed(gradient)) continue;
        const int64_t n = gradient.size(0), m = gradient.numel() / n;
        const int64_t r = std::min<int64_t>({options_.matrix_approximation_rank, n, m});
        entry->second.push_back({gradient.view({n, m}), Tensor(), random_q({m, r}, gradient)});
      }
    return entry->second;
  }

  // Drawn on the CPU from the shared seed, so that every rank, on any device, starts from the same Q.
  Tensor random_q(const Shape& shape, const Tensor& like) {
    return randn(shape, {like.dtype()}, &generator_).to(like.device());
  }

  // P summed over the ranks -> orthonormal P -> Q = M^T P summed -> M = P Q^T / world.
  void finish_compressed(ProcessGroup& group, size_t index, const Tensor& p_flat, int world) {
    std::vector<Factors>& factors = factors_.at(index);
    TensorList qs;
    int64_t offset = 0;
    for (Factors& f : factors) {
      const int64_t n = f.matrix.size(0), r = f.q.size(1);
      f.p = p_flat.narrow(0, offset, n * r).view({n, r});
      offset += n * r;
      orthogonalize(f.p);
      qs.push_back(mm(f.matrix.t(), f.p).reshape({-1}));
    }
    Tensor q_flat = cat(qs);
    group.all_reduce(q_flat, ReduceOp::SUM)->wait();
    offset = 0;
    for (Factors& f : factors) {
      f.q.copy_(q_flat.narrow(0, offset, f.q.numel()).view(f.q.sizes()));
      offset += f.q.numel();
      f.matrix.copy_(mm(f.p, f.q.t()) / static_cast<double>(world));
    }
  }

  PowerSGDOptions options_;
  Generator generator_;
  int64_t iteration_ = 0;  // synchronised backwards so far
  std::map<size_t, Tensor> errors_;
  std::map<size_t, std::vector<Factors>> factors_;
};

}  // namespace

CommHook powerSGD_hook(PowerSGDOptions options) {
  auto state = std::make_shared<PowerSGD>(options);
  return [state](ProcessGroup& group, GradBucket& bucket) { return (*state)(group, bucket); };
}

}  // namespace sg::dist
