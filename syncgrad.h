#pragma once
// The umbrella header: everything a program needs to use syncgrad.
#include "autograd/gradcheck.h"      // defines: gradcheck
#include "autograd/grad_mode.h"      // defines: NoGradGuard, GradMode
#include "autograd/ops_conv.h"       // defines: conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d
#include "autograd/ops_index.h"      // defines: cat, stack, split, gather, embedding, ...
#include "autograd/ops_linalg.h"     // defines: matmul, mm, bmm, addmm
#include "autograd/ops_pointwise.h"  // defines: add, mul, exp, relu, where, ...
#include "autograd/ops_reduce.h"     // defines: sum, mean, max, var, softmax, ...
#include "autograd/ops_shape.h"      // defines: reshape, permute, slice, ...
#include "core/factory.h"            // defines: zeros, ones, randn, arange, tensor, ...
#include "core/parallel.h"           // defines: set_num_threads
#include "core/tensor.h"             // defines: Tensor
#include "data/dataloader.h"         // defines: DataLoader, Batch, default_collate
#include "data/dataset.h"            // defines: Dataset, TensorDataset, Subset, random_split
#include "data/fashion_mnist.h"      // defines: FashionMNIST
#include "data/idx.h"                // defines: read_idx
#include "data/sampler.h"            // defines: SequentialSampler, RandomSampler, BatchSampler
#include "data/transforms.h"         // defines: ToFloat, Normalize, Compose
#include "nn/conv.h"                  // defines: nn::Conv2d
#include "nn/pooling.h"               // defines: nn::MaxPool2d, nn::AvgPool2d, nn::AdaptiveAvgPool2d
