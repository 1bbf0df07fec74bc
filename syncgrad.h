#pragma once
// The umbrella header: everything a program needs to use syncgrad.
#include "amp/autocast.h"                    // defines: amp::AutocastGuard
#include "amp/grad_scaler.h"                 // defines: amp::GradScaler
#include "autograd/anomaly_mode.h"           // defines: autograd::DetectAnomalyGuard, autograd::set_detect_anomaly
#include "autograd/checkpoint.h"             // defines: autograd::checkpoint, autograd::CheckpointOptions
#include "autograd/custom_function.h"        // defines: autograd::Function, autograd::FunctionContext
#include "autograd/grad_mode.h"              // defines: NoGradGuard, GradModeGuard, GradMode
#include "autograd/gradcheck.h"              // defines: gradcheck
#include "autograd/ops_attention.h"          // defines: scaled_dot_product_attention
#include "autograd/ops_conv.h"               // defines: conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d
#include "autograd/ops_index.h"              // defines: cat, stack, split, gather, embedding, ...
#include "autograd/ops_linalg.h"             // defines: matmul, mm, bmm, addmm, linear
#include "autograd/ops_norm.h"               // defines: batch_norm, layer_norm
#include "autograd/ops_pointwise.h"          // defines: add, mul, exp, relu, where, ...
#include "autograd/ops_random.h"             // defines: multinomial
#include "autograd/ops_reduce.h"             // defines: sum, mean, max, var, softmax, ...
#include "autograd/ops_shape.h"              // defines: reshape, permute, slice, ...
#include "autograd/ops_sort.h"               // defines: sort, argsort, topk
#include "core/cuda_runtime/event.h"         // defines: cuda::Event (timing GPU work)
#include "core/cuda_runtime/runtime.h"       // defines: cuda::is_available, device_count, memory_stats, empty_cache
#include "core/factory.h"                    // defines: zeros, ones, randn, arange, tensor, ...
#include "core/parallel.h"                   // defines: set_num_threads
#include "core/profiler.h"                   // defines: profiler::Profile, profiler::RecordScope
#include "core/safetensors.h"                // defines: save_safetensors, load_safetensors
#include "core/tensor.h"                     // defines: Tensor
#include "data/char_dataset.h"               // defines: CharDataset, CharVocabulary, fortunes_corpus
#include "data/dataloader.h"                 // defines: DataLoader, Batch, default_collate
#include "data/dataset.h"                    // defines: Dataset, TensorDataset, Subset, random_split, example_generator
#include "data/distributed_batch_sampler.h"  // defines: DistributedBatchSampler
#include "data/distributed_sampler.h"        // defines: DistributedSampler, drop_padding
#include "data/fashion_mnist.h"              // defines: FashionMNIST
#include "data/idx.h"                        // defines: read_idx
#include "data/image.h"                      // defines: read_image, decode_image, write_png, write_jpeg
#include "data/image_folder.h"               // defines: ImageFolder, list_image_folder, split_image_folder
#include "data/image_transforms.h"   // defines: RandomResizedCrop, RandomHorizontalFlip, Resize, CenterCrop, ToTensor
#include "data/resample.h"           // defines: resize_bilinear
#include "data/sampler.h"            // defines: SequentialSampler, RandomSampler, BatchSampler
#include "data/transforms.h"         // defines: ToFloat, Normalize, Compose, RandomTransform
#include "dist/ddp.h"                // defines: dist::DistributedDataParallel, DDPOptions
#include "dist/default_hooks.h"      // defines: dist::fp16_compress_hook, bf16_compress_hook, allreduce_hook
#include "dist/dist.h"               // defines: dist::init_process_group, get_rank, all_reduce, ...
#include "dist/powersgd_hook.h"      // defines: dist::powerSGD_hook, PowerSGDOptions
#include "dist/sync_batchnorm.h"     // defines: dist::convert_sync_batchnorm
#include "launch/spawn.h"            // defines: dist::spawn (run a function on N processes)
#include "log/profiler_report.h"     // defines: profiler::key_averages, profiler::write_chrome_trace
#include "log/step_profiler.h"       // defines: profiler::StepProfiler (the apps' --profile DIR)
#include "log/summary_writer.h"      // defines: SummaryWriter (TensorBoard event files), SummaryWriterOptions
#include "log/timeline_svg.h"        // defines: profiler::timeline_svg, profiler::write_timeline_svg
#include "models/cnn.h"              // defines: models::CNN, models::BasicNet, make_fashion_mnist_model
#include "models/gpt.h"              // defines: models::GPT, GPTConfig, create_optimizer, gpt_loss
#include "models/resnet.h"           // defines: models::ResNet, resnet18, resnet34, resnet50, make_resnet
#include "nn/activation.h"           // defines: nn::ReLU, nn::GELU, nn::Tanh, nn::Sigmoid
#include "nn/basic.h"                // defines: nn::Flatten, nn::Identity
#include "nn/batchnorm.h"            // defines: nn::BatchNorm1d, nn::BatchNorm2d
#include "nn/checkpointing.h"        // defines: nn::checkpoint_sequential
#include "nn/container.h"            // defines: nn::Sequential, nn::ModuleList
#include "nn/conv.h"                 // defines: nn::Conv2d
#include "nn/dropout.h"              // defines: nn::Dropout
#include "nn/embedding.h"            // defines: nn::Embedding
#include "nn/functional.h"           // defines: nn::functional::cross_entropy, nll_loss, mse_loss, dropout
#include "nn/init.h"                 // defines: nn::init::kaiming_uniform_, xavier_normal_, ...
#include "nn/layernorm.h"            // defines: nn::LayerNorm
#include "nn/linear.h"               // defines: nn::Linear
#include "nn/loss.h"                 // defines: nn::CrossEntropyLoss, nn::MSELoss
#include "nn/module.h"               // defines: nn::Module
#include "nn/module_hooks.h"         // defines: nn::RemovableHandle, nn::ForwardHook, ...
#include "nn/multihead_attention.h"  // defines: nn::MultiheadAttention
#include "nn/pooling.h"              // defines: nn::MaxPool2d, nn::AvgPool2d, nn::AdaptiveAvgPool2d
#include "nn/pretrained.h"           // defines: nn::load_pretrained, nn::PretrainedReport
#include "nn/rmsnorm.h"              // defines: nn::RMSNorm
#include "optim/adam.h"              // defines: Adam, AdamW
#include "optim/checkpoint.h"        // defines: save_checkpoint, load_checkpoint
#include "optim/clip_grad.h"         // defines: clip_grad_norm_, clip_grad_value_
#include "optim/fine_tuning_weights.h"        // defines: load_fine_tuning_weights
#include "optim/lr_scheduler.h"               // defines: StepLR, CosineAnnealingLR, LambdaLR, WarmupCosineLR
#include "optim/sgd.h"                        // defines: SGD
#include "train/accelerator.h"                // defines: dist::Accelerator
#include "train/trainer.h"                    // defines: dist::Trainer, TrainingArguments, TrainerCallback
#include "train/virtual_ranks.h"              // defines: dist::VirtualRanks
#include "train/zero_redundancy_optimizer.h"  // defines: dist::ZeroRedundancyOptimizer (ZeRO-1)
