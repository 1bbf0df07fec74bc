// The CPU convolutions on oneDNN primitives: forward, backward data and backward weights, each one
// oneDNN call between reorders of its operands (the CPU counterpart of cuDNN in core/cuda/conv.cpp).
// Shape letters as in core/kernels/conv.h: input [N, C, H, W], weight [K, C / G, R, S], out [N, K, P, Q].
//
// Note [oneDNN convolution plans]
// A oneDNN primitive is made by choosing an implementation for the shapes and JIT-compiling its kernel:
// 0.1-0.5 ms here. oneDNN keeps compiled kernels in a cache of its own, but even a hit there chooses the
// implementation again (~5-10 us, as long as the smallest convolutions below take ~5%). So the primitive
// for one pass, shapes, parameters and thread count is made once, together with the reorders around it
// and the size of its scratch memory, and kept as a Plan. The thread count is part of the key because
// oneDNN fixes a primitive's split of the work when it makes it, from omp_get_max_threads(), which
// sg::set_num_threads sets (Debian's oneDNN is built on OpenMP, the one pool our kernels and OpenBLAS
// use): a primitive made for 2 threads would still start 2 after set_num_threads(1). The plans are
// one map behind a mutex; a plan never changes once made and may run on several threads at once, since
// every call brings its own stream and its calling thread's scratch memory (scratchpad_mode::user).
//
// Note [When oneDNN runs]
// oneDNN's direct convolutions (jit:avx2 here, AVX-512 kernels elsewhere) compute on channel-blocked
// layouts: nChw8c images and OIhw8i8o weights hold 8 channels side by side, one AVX2 register. Our
// tensors are plain NCHW, so the operands are described to oneDNN as format_tag::any, it chooses its
// kernel and their layouts, and every call reorders the inputs into those layouts and the result back
// (the weights too: they change at every step). Described as plain NCHW instead, the operands restrict
// oneDNN to its own im2col + GEMM (gemm:jit), which on these shapes is no faster than our im2col +
// OpenBLAS reference (0.65-1.3x its time on 1 thread, 0.8-3.4x on 2), so that reference runs wherever
// the blocked kernels do not beat it. Measured on the shapes of bench/conv.cpp on 1 and 2 threads
// (docs/performance.md has the tables), they do:
//   - forward: for every kernel but 1x1 (0.95-1.7x the reference's speed on 1 and 2 threads, 1 or 3
//     input channels included, which oneDNN then reads as NCHW without a reorder), except ungrouped
//     ones whose output images have fewer than 16 pixels: on ResNet34's 2x2 outputs (64x64 images)
//     the blocked kernel took 1.3x the time of im2col + GEMM with the batch's images folded into one
//     GEMM (Note [Folding images into one GEMM] in core/cpu/conv.cpp), while on 4x4 outputs it is
//     still as fast or faster;
//   - grad_input: when the input has >= 8 channels (1.2-1.85x); with 1 or 3 channels the 8-channel
//     blocks are mostly padding and take 1.5-4x as long as gemm:jit;
//   - grad_weight: while the weight is small, fewer than 64 x 64 channels per group (0.93-1.6x on the
//     CNN's second layer and ResNet's stem), but not for a single input channel (2.5-5x slower than
//     gemm:jit: the blocks padded 8-fold); from 64 x 64 channels on, the reference is as fast on 1
//     thread and up to 1.45x faster on 2, and on small images the folded path (Note [Weight
//     gradient over the whole batch] in core/cpu/conv.cpp) up to 2.4x faster than the reference;
//   - 1x1 kernels: never; they do so little arithmetic per element that the reorders cost what
//     blocking saves (0.7-1.7x gemm:jit's time, no consistent winner).
// On AVX-512 CPUs oneDNN also has Winograd kernels (jit_wino_4x3: F(4x4, 3x3), 4 x 4 output pixels per
// tile from 6 x 6 input pixels, 2.25x fewer multiplications than the direct sum). They run, for all three
// passes, on every ungrouped 3x3 stride-1 convolution with at least 64 output tiles over the batch,
// whatever the rule above says: on ResNet34's 3x3 convolutions of the Sapphire Rapids Xeon
// (docs/performance.md, "Winograd on AVX-512") they took 0.45-0.7x the time of the direct kernels,
// and 0.3-0.5x that of im2col + GEMM for the weight gradients, at 56² and 28², and at 14² and 16²
// with batch 16; 0.8-0.95x forward and 0.6x for the weight gradient at batch 4's 14² (64 tiles);
// at 7² and batch 4 (16 tiles, half of them padding) they were up to 2x slower. The price is
// precision: the transforms add and subtract multiples of the inputs, so on a 256-channel stage the
// results lie between 1e-6 and 1e-5 of the largest value from the im2col reference, where the direct
// kernels stay below 1e-6 (cuDNN's Winograd on a GPU is of the same order; TF32 is 100x coarser).
// tests/test_conv.cpp holds every fast path to 1e-5. Elsewhere (AVX2), creating the Winograd
// primitive fails and the rule above decides.
// A depthwise convolution (groups = C >= 8) gets oneDNN's depthwise kernels (jit_dw), 5-12x faster than
// a GEMM. Where oneDNN picks its GEMM path or its naive reference for blocked layouts anyway (odd group
// sizes, some dilations), the reference runs. The rule is fixed, not timed at run time: a timed choice
// could differ from run to run, and so would the bits (Note [oneDNN and determinism]).
//
// Note [oneDNN and determinism]
// A plan's kernel splits the work the same way at every call, and reorders only move numbers, so the
// same thread count gives the same bits run to run (docs/tensor.md: Threads and determinism;
// tests/test_conv.cpp checks). oneDNN promises nothing across thread counts; its blocked AVX2 kernels
// gave the same bits on 1 and 2 threads on every shape tried here, and the weight gradients that fall
// to the reference sum in an order fixed by N alone.
#include "core/cpu/conv_onednn.h"

#include <optional>
#include <unordered_map>

#include "core/cpu/onednn_plans.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"

namespace sg::cpu::onednn {

namespace {

using dnnl::memory;

// One convolution call as a plan sees it.
struct Call {
  ConvPass pass;
  Shape input, weight, out;
  Conv2dParams params;
  bool bias;  // forward only: whether oneDNN adds one
};

// Our tensors as oneDNN sees them, and the convolution's geometry in oneDNN's terms.
struct Descriptors {
  memory::desc input, weight, bias, out;  // bias: the empty desc when there is none
  memory::dims strides, dilates, padding;
};

// Contiguous NCHW tensors; the weight [K, C / G, R, S] as oihw, or with groups as goihw
// [G, K / G, C / G, R, S] (the same bytes). oneDNN's dilation counts the gaps: ours minus 1. Padding is
// the same on both sides: oneDNN rounds the output size down as we do (window_output_size), so a
// last row that the stride skips needs no smaller right padding.
Descriptors descriptors_of(const Call& call) {
  const auto dims = [](const Shape& shape) { return memory::dims(shape.begin(), shape.end()); };
  const Shape& w = call.weight;
  const int64_t G = call.params.groups;
  const auto f32 = memory::data_type::f32;
  using Tag = memory::format_tag;
  Descriptors d;
  d.input = memory::desc(dims(call.input), f32, Tag::nchw);
  d.out = memory::desc(dims(call.out), f32, Tag::nchw);
  d.weight =
      G == 1 ? memory::desc(dims(w), f32, Tag::oihw) : memory::desc({G, w[0] / G, w[1], w[2], w[3]}, f32, Tag::goihw);
  if (call.bias) d.bias = memory::desc({w[0]}, f32, Tag::x);
  const Conv2dParams& p = call.params;
  d.strides = {p.stride.h, p.stride.w};
  d.dilates = {p.dilation.h - 1, p.dilation.w - 1};
  d.padding = {p.padding.h, p.padding.w};
  return d;
}

// An ungrouped forward pass runs on oneDNN where an output image has at least this many pixels
// (Note [When oneDNN runs]).
constexpr int64_t kMinForwardPixels = 16;

// Whether oneDNN's blocked kernels pay for the reorders around them on `call` (Note [When oneDNN runs]).
bool blocked_kernels_pay_off(const Call& call) {
  const int64_t C = call.input[1], K = call.weight[0], G = call.params.groups;
  const bool pointwise = call.weight[2] == 1 && call.weight[3] == 1;
  if (pointwise) return false;
  if (call.pass == ConvPass::grad_input) return C >= 8;
  if (call.pass == ConvPass::grad_weight) return C > 1 && (C / G) * (K / G) < 64 * 64;
  return G > 1 || call.out[2] * call.out[3] >= kMinForwardPixels;  // forward
}

// Winograd's F(4x4, 3x3) computes an ungrouped 3x3, stride-1 convolution in tiles of 4 x 4 output
// pixels with 2.25x fewer multiplications; it pays once there are enough tiles to keep the kernel
// busy (Note [When oneDNN runs]).
constexpr int64_t kMinWinogradTiles = 64;

bool winograd_pays_off(const Call& call) {
  const Conv2dParams& p = call.params;
  const bool three_by_three = call.weight[2] == 3 && call.weight[3] == 3;
  const bool unit_steps = p.stride.h == 1 && p.stride.w == 1 && p.dilation.h == 1 && p.dilation.w == 1;
  if (!three_by_three || !unit_steps || p.groups != 1) return false;
  const int64_t tiles = call.out[0] * ((call.out[2] + 3) / 4) * ((call.out[3] + 3) / 4);
  return tiles >= kMinWinogradTiles;
}

// One operand of a primitive: our plain layout, the primitive's, and the reorder between them (ours to
// theirs for an input, theirs to ours for the output) when they differ.
struct Operand {
  Operand(int arg, const char* name, const memory::desc& ours, const memory::desc& theirs)
      : arg(arg),
        name(name),
        ours(ours),
        theirs(theirs) {}
  int arg;           // DNNL_ARG_SRC, ...
  const char* name;  // for implementation()
  memory::desc ours, theirs;
  std::optional<dnnl::reorder> reorder;
};

void add_reorder(Operand& operand, bool is_output) {
  if (operand.ours == operand.theirs) return;
  const dnnl::engine& engine = cpu_engine();
  operand.reorder = is_output ? dnnl::reorder({engine, operand.theirs, engine, operand.ours})
                              : dnnl::reorder({engine, operand.ours, engine, operand.theirs});
}

struct Plan {
  dnnl::primitive primitive;
  std::vector<Operand> inputs;  // in the order the try_ functions pass their tensors
  Operand output;
  memory::desc scratchpad;
  std::string implementation;  // oneDNN's name for it, e.g. "jit:avx2"
};

// The plan for `call` with the implementation oneDNN chooses for blocked layouts, or null when that is
// not one of its direct kernels but its GEMM path (no faster than our im2col + GEMM here) or its naive
// reference (far slower) (Note [When oneDNN runs]).
std::shared_ptr<const Plan> make_plan_with(const Call& call, dnnl::algorithm algorithm) {
  const Descriptors ours = descriptors_of(call);
  const auto any = [](const memory::desc& desc) {
    return memory::desc(desc.dims(), desc.data_type(), memory::format_tag::any);
  };
  const memory::desc input = any(ours.input), weight = any(ours.weight), out = any(ours.out);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // The forward's primitive descriptor is also the backward passes' hint (oneDNN requires one).
  const dnnl::convolution_forward::primitive_desc forward(
      {dnnl::prop_kind::forward_training, algorithm, input, weight, ours.bias, out, ours.strides, ours.dilates,
       ours.padding, ours.padding},
      attr, cpu_engine());
  const auto plan = [](const dnnl::primitive_desc& pd, std::vector<Operand> inputs,
                       Operand output) -> std::shared_ptr<const Plan> {
    const std::string implementation = pd.impl_info_str();
    if (implementation.rfind("ref", 0) == 0 || implementation.find("gemm") != std::string::npos) return nullptr;
    for (Operand& operand : inputs) add_reorder(operand, false);
    add_reorder(output, true);
    return std::make_shared<const Plan>(
        Plan{dnnl::primitive(pd), std::move(inputs), std::move(output), pd.scratchpad_desc(), implementation});
  };
  switch (call.pass) {
    case ConvPass::forward: {
      std::vector<Operand> inputs{{DNNL_ARG_SRC, "input", ours.input, forward.src_desc()},
                                  {DNNL_ARG_WEIGHTS, "weight", ours.weight, forward.weights_desc()}};
      if (call.bias) inputs.emplace_back(DNNL_ARG_BIAS, "bias", ours.bias, forward.bias_desc());
      return plan(forward, std::move(inputs), {DNNL_ARG_DST, "out", ours.out, forward.dst_desc()});
    }
    case ConvPass::grad_input: {
      const dnnl::convolution_backward_data::primitive_desc pd(
          {algorithm, input, weight, out, ours.strides, ours.dilates, ours.padding, ours.padding}, attr, cpu_engine(),
          forward);
      return plan(pd,
                  {{DNNL_ARG_DIFF_DST, "grad_out", ours.out, pd.diff_dst_desc()},
                   {DNNL_ARG_WEIGHTS, "weight", ours.weight, pd.weights_desc()}},
                  {DNNL_ARG_DIFF_SRC, "grad_input", ours.input, pd.diff_src_desc()});
    }
    case ConvPass::grad_weight: {
      const dnnl::convolution_backward_weights::primitive_desc pd(
          {algorithm, input, weight, memory::desc(), out, ours.strides, ours.dilates, ours.padding, ours.padding}, attr,
          cpu_engine(), forward);
      return plan(pd,
                  {{DNNL_ARG_DIFF_DST, "grad_out", ours.out, pd.diff_dst_desc()},
                   {DNNL_ARG_SRC, "input", ours.input, pd.src_desc()}},
                  {DNNL_ARG_DIFF_WEIGHTS, "grad_weight", ours.weight, pd.diff_weights_desc()});
    }
  }
  return nullptr;
}

// The plan for `call`: Winograd where it pays and this CPU has it, else the direct blocked kernels
// where they pay, else none (Note [When oneDNN runs]).
std::shared_ptr<const Plan> make_plan(const Call& call) {
  if (winograd_pays_off(call)) {
    try {
      if (auto made = make_plan_with(call, dnnl::algorithm::convolution_winograd)) return made;
    } catch (const dnnl::error&) {  // oneDNN has Winograd kernels for AVX-512 CPUs only
    }
  }
  if (!blocked_kernels_pay_off(call)) return nullptr;
  return make_plan_with(call, dnnl::algorithm::convolution_direct);
}

// The cached plan for `call` at the current thread count (Note [oneDNN convolution plans]); null when
// oneDNN declines the call.
std::shared_ptr<const Plan> plan_for(const Call& call, DType dtype) {
  if (dtype != DType::f32) return nullptr;
  if (numel_of(call.input) == 0 || numel_of(call.weight) == 0 || numel_of(call.out) == 0) return nullptr;
  if (!winograd_pays_off(call) && !blocked_kernels_pay_off(call)) return nullptr;
  std::vector<int64_t> key{static_cast<int64_t>(call.pass),
                           call.bias,
                           call.params.groups,
                           call.params.stride.h,
                           call.params.stride.w,
                           call.params.padding.h,
                           call.params.padding.w,
                           call.params.dilation.h,
                           call.params.dilation.w};
  for (const Shape* shape : {&call.input, &call.weight, &call.out}) key.insert(key.end(), shape->begin(), shape->end());
  static PlanCache<Plan> plans;
  return plans.get(std::move(key), [&] { return make_plan(call); });
}

// Runs a plan on contiguous inputs (in the plan's order) into the contiguous `output`.
void run(const Plan& plan, const TensorList& inputs, const Tensor& output) {
  const dnnl::engine& engine = cpu_engine();
  dnnl::stream stream(engine);
  TensorList buffers;  // reordered operands, alive until the stream is done
  const auto buffer = [&](const memory::desc& desc) {
    buffers.push_back(empty({static_cast<int64_t>(desc.get_size())}, {DType::u8}));
    return memory(desc, engine, buffers.back().raw_data());
  };
  std::unordered_map<int, memory> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Operand& operand = plan.inputs[i];
    memory ours(operand.ours, engine, inputs[i].raw_data());
    if (!operand.reorder) {
      args.emplace(operand.arg, ours);
      continue;
    }
    memory theirs = buffer(operand.theirs);
    operand.reorder->execute(stream, ours, theirs);
    args.emplace(operand.arg, theirs);
  }
  memory out(plan.output.ours, engine, output.raw_data());
  memory result = plan.output.reorder ? buffer(plan.output.theirs) : out;
  args.emplace(plan.output.arg, result);
  if (plan.scratchpad.get_size() > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 memory(plan.scratchpad, engine, scratchpad_of_this_thread(plan.scratchpad.get_size())));
  plan.primitive.execute(stream, args);
  if (plan.output.reorder) plan.output.reorder->execute(stream, result, out);
  stream.wait();
}

// Runs `call` on oneDNN when it has a plan for it; the inputs are made contiguous first.
bool try_run(const Call& call, const TensorList& inputs, const Tensor& output, const char* op_name) {
  SG_CHECK(output.is_contiguous(), op_name, ": the kernel writes contiguous outputs, got strides ",
           shape_str(output.strides()));
  const std::shared_ptr<const Plan> plan = plan_for(call, output.dtype());
  if (!plan) return false;
  TensorList contiguous_inputs;
  for (const Tensor& input : inputs) contiguous_inputs.push_back(kernels::contiguous(input));
  try {
    run(*plan, contiguous_inputs, output);
  } catch (const dnnl::error& error) {
    SG_FAIL(op_name, ": oneDNN failed (", error.what(), ") on input ", shape_str(call.input), " and weight ",
            shape_str(call.weight));
  }
  return true;
}

Shape out_shape(const Shape& input, const Shape& weight, const Conv2dParams& p) {
  return {input[0], weight[0], window_output_size(input[2], weight[2], p.stride.h, p.padding.h, p.dilation.h),
          window_output_size(input[3], weight[3], p.stride.w, p.padding.w, p.dilation.w)};
}

}  // namespace

bool try_conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                const Conv2dParams& params) {
  const Call call{ConvPass::forward, input.sizes(), weight.sizes(), out.sizes(), params, bias.defined()};
  return try_run(call, bias.defined() ? TensorList{input, weight, bias} : TensorList{input, weight}, out, "conv2d");
}

bool try_conv2d_grad_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& params) {
  const Call call{ConvPass::grad_input, grad_input.sizes(), weight.sizes(), grad_out.sizes(), params, false};
  return try_run(call, {grad_out, weight}, grad_input, "conv2d_grad_input");
}

bool try_conv2d_grad_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                            const Conv2dParams& params) {
  const Call call{ConvPass::grad_weight, input.sizes(), grad_weight.sizes(), grad_out.sizes(), params, false};
  return try_run(call, {grad_out, input}, grad_weight, "conv2d_grad_weight");
}

std::string implementation(ConvPass pass, const Shape& input, const Shape& weight, DType dtype,
                           const Conv2dParams& params) {
  const std::shared_ptr<const Plan> plan =
      plan_for({pass, input, weight, out_shape(input, weight, params), params, false}, dtype);
  if (!plan) return "";
  std::string reordered;
  const auto list_if_reordered = [&](const Operand& operand) {
    if (operand.reorder) reordered += std::string(reordered.empty() ? "" : ", ") + operand.name;
  };
  for (const Operand& input : plan->inputs) list_if_reordered(input);
  list_if_reordered(plan->output);
  return plan->implementation + (reordered.empty() ? ", no reorders" : ", reorders " + reordered);
}

}  // namespace sg::cpu::onednn
