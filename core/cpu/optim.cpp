// CPU optimizer kernels: one strided pass (core/cpu/loops.h, parallel over elements) that loads
// the parameter, its gradient and its state, runs the per-element math of core/optim_math.h in
// opmath_t and stores the results.
#include <utility>

#include "core/cpu/operands.h"
#include "core/cpu/optim_kernels.h"

namespace sg::cpu {

namespace {
// Calls f(element of tensors[0], ..., element of tensors[N-1]) as scalar_t& for every element;
// the tensors share one shape. The contiguous case indexes plain arrays so it vectorises.
template <typename scalar_t, int N, typename F>
void for_each_element(const std::array<const Tensor*, N>& tensors, F f) {
  const Shape& shape = tensors[0]->sizes();
  for_each_run<N>(shape, make_operands<N>(shape, tensors),
                  [&](const std::array<char*, N>& p, const std::array<int64_t, N>& s, int64_t n) {
                    bool contiguous = true;
                    for (int k = 0; k < N; ++k)
                      contiguous = contiguous && s[k] == static_cast<int64_t>(sizeof(scalar_t));
                    // A local copy of f (and of the scalars it holds): the stores below cannot alias it, so the
                    // compiler keeps the scalars in registers and can vectorise the loop.
                    const F element = f;
                    [&]<size_t... K>(std::index_sequence<K...>) {
                      if (contiguous) {
                        for (int64_t i = 0; i < n; ++i) element(reinterpret_cast<scalar_t*>(p[K])[i]...);
                      } else {
                        for (int64_t i = 0; i < n; ++i) element(*reinterpret_cast<scalar_t*>(p[K] + i * s[K])...);
                      }
                    }
                    (std::make_index_sequence<N>{});
                  });
}
}  // namespace

namespace {
template <typename scalar_t>
void adam_step_typed(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                     const Tensor& max_exp_avg_sq, const AdamStep& step) {
  using math_t = opmath_t<scalar_t>;
  const auto scalars = math::adam_scalars<math_t>(step);
  if (step.amsgrad) {
    for_each_element<scalar_t, 5>({&param, &grad, &exp_avg, &exp_avg_sq, &max_exp_avg_sq},
                                  [scalars](scalar_t& p, scalar_t& g, scalar_t& m, scalar_t& v, scalar_t& v_max) {
                                    math_t p_ = p, m_ = m, v_ = v, v_max_ = v_max;
                                    math::adam_element<math_t>(p_, math_t(g), m_, v_, v_max_, scalars);
                                    p = scalar_t(p_), m = scalar_t(m_), v = scalar_t(v_), v_max = scalar_t(v_max_);
                                  });
  } else {
    for_each_element<scalar_t, 4>({&param, &grad, &exp_avg, &exp_avg_sq},
                                  [scalars](scalar_t& p, scalar_t& g, scalar_t& m, scalar_t& v) {
                                    math_t p_ = p, m_ = m, v_ = v, unused = 0;
                                    math::adam_element<math_t>(p_, math_t(g), m_, v_, unused, scalars);
                                    p = scalar_t(p_), m = scalar_t(m_), v = scalar_t(v_);
                                  });
  }
}

template <typename scalar_t>
void sgd_step_typed(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDStep& step) {
  using math_t = opmath_t<scalar_t>;
  const auto scalars = math::sgd_scalars<math_t>(step);
  if (step.momentum != 0.0) {
    for_each_element<scalar_t, 3>({&param, &grad, &momentum_buffer}, [scalars](scalar_t& p, scalar_t& g, scalar_t& b) {
      math_t p_ = p, b_ = b;
      math::sgd_element<math_t>(p_, math_t(g), b_, scalars);
      p = scalar_t(p_), b = scalar_t(b_);
    });
  } else {
    for_each_element<scalar_t, 2>({&param, &grad}, [scalars](scalar_t& p, scalar_t& g) {
      math_t p_ = p, unused = 0;
      math::sgd_element<math_t>(p_, math_t(g), unused, scalars);
      p = scalar_t(p_);
    });
  }
}
}  // namespace

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& step) {
  SG_DISPATCH_FLOATING(param.dtype(), "adam_step", [&]<typename scalar_t>() {
    adam_step_typed<scalar_t>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step);
  });
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDStep& step) {
  SG_DISPATCH_FLOATING(param.dtype(), "sgd_step",
                       [&]<typename scalar_t>() { sgd_step_typed<scalar_t>(param, grad, momentum_buffer, step); });
}

}  // namespace sg::cpu
