// A Linear layer's f32 product with its bias, on oneDNN's matmul primitive.
//
// Note [The bias inside the GEMM]
// y = x W^T + b can run as a plain GEMM only if y first holds b in every row and the GEMM adds to
// it (beta = 1): one pass that writes all of y, then a GEMM that reads y back. On gpt-mini's linear
// layers ([4096, 192] x [192, 576] and the like) that costs 5-25% over the product alone. oneDNN's
// matmul primitive takes the bias as an argument and adds it to each output tile while the tile is
// in registers, so y is written once and never read. It runs where f32 GEMM is oneDNN's anyway
// (Note [The f32 GEMM library] in core/cpu/blas.h): 2-D f32 operands with positive strides, a
// contiguous out and k > 0; and only where oneDNN has an optimised kernel for the shapes and strides
// (never its reference implementation). Everything else keeps the copy and the beta = 1 GEMM.
// A primitive is made once per shapes, strides and thread count and cached like the convolutions'
// (Note [oneDNN convolution plans] in core/cpu/conv_onednn.cpp); it splits its work the same way at
// every call, so the same thread count gives the same bits run to run.
#include "core/cpu/gemm_onednn.h"

#include "core/cpu/blas.h"
#include "core/cpu/onednn_plans.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"

namespace sg::cpu::onednn {

namespace {

using dnnl::memory;

struct MatmulPlan {
  dnnl::matmul primitive;
  memory::desc a, b, bias, out, scratchpad;
};

memory::desc matrix_desc(const Tensor& t) {
  return memory::desc({t.size(0), t.size(1)}, memory::data_type::f32, {t.stride(0), t.stride(1)});
}

// Null where oneDNN would run its reference implementation (far slower than the plain GEMM).
std::shared_ptr<const MatmulPlan> make_plan(const Tensor& out, const Tensor& a, const Tensor& b) {
  const memory::desc a_desc = matrix_desc(a), b_desc = matrix_desc(b), out_desc = matrix_desc(out);
  const memory::desc bias_desc({1, out.size(1)}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // Note [oneDNN scratch memory]
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_desc, bias_desc, out_desc), attr, cpu_engine());
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
  return std::make_shared<const MatmulPlan>(
      MatmulPlan{dnnl::matmul(pd), a_desc, b_desc, bias_desc, out_desc, pd.scratchpad_desc()});
}

bool positive_strides(const Tensor& t) { return t.stride(0) > 0 && t.stride(1) > 0; }

}  // namespace

bool try_gemm_bias(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  if (out.dtype() != DType::f32 || out.dim() != 2 || !out.is_contiguous() || a.size(1) == 0) return false;
  if (!positive_strides(a) || !positive_strides(b) || !f32_gemm_on_onednn()) return false;
  static PlanCache<MatmulPlan> plans;
  const std::shared_ptr<const MatmulPlan> plan =
      plans.get({out.size(0), out.size(1), a.size(1), a.stride(0), a.stride(1), b.stride(0), b.stride(1)},
                [&] { return make_plan(out, a, b); });
  if (!plan) return false;
  const Tensor bias_row = kernels::contiguous(bias);
  void* scratchpad = scratchpad_of_this_thread(plan->scratchpad.get_size());
  const dnnl::engine& engine = cpu_engine();
  dnnl::stream stream(engine);
  try {
    plan->primitive.execute(stream, {{DNNL_ARG_SRC, memory(plan->a, engine, a.raw_data())},
                                     {DNNL_ARG_WEIGHTS, memory(plan->b, engine, b.raw_data())},
                                     {DNNL_ARG_BIAS, memory(plan->bias, engine, bias_row.raw_data())},
                                     {DNNL_ARG_DST, memory(plan->out, engine, out.raw_data())},
                                     {DNNL_ARG_SCRATCHPAD, memory(plan->scratchpad, engine, scratchpad)}});
    stream.wait();
  } catch (const dnnl::error& error) {
    SG_FAIL("gemm with bias: oneDNN's matmul failed (", error.what(), ") on a ", shape_str(a.sizes()), " (strides ",
            shape_str(a.strides()), ") @ b ", shape_str(b.sizes()), " (strides ", shape_str(b.strides()), ")");
  }
  return true;
}

}  // namespace sg::cpu::onednn
