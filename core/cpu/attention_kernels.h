#pragma once
// defines: cpu::attention_forward, cpu::attention_backward, cpu::attention_dropout_keep (core/cpu/attention.cpp).
// The CPU half of core/kernels/attention.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/attention.h"

namespace sg::cpu {
void attention_forward(const Tensor& out, const Tensor& log_sum_exp, const Tensor& dropout_keep, const Tensor& q,
                       const Tensor& k, const Tensor& v, const AttentionArgs& args);
void attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& log_sum_exp,
                        const Tensor& dropout_keep, const AttentionArgs& args);
void attention_dropout_keep(const Tensor& keep, const AttentionArgs& args);
}  // namespace sg::cpu
