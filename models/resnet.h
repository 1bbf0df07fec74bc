#pragma once
// defines: models::ResNet, models::BasicBlock, models::Bottleneck, models::ResNetOptions and the
//          torchvision presets resnet18, resnet34, resnet50, make_resnet.
//
// Note [ResNet is torchvision's]
//   Every module, parameter and buffer has torchvision's name and shape (conv1, bn1,
//   layer1.0.conv1.weight, layer2.0.downsample.0.weight, layer2.0.downsample.1.running_mean,
//   fc.bias, ...), and the children are registered in torchvision's order, so a state_dict moves
//   between the two in both directions (nn::load_pretrained, scripts/convert-torchvision-weights.py)
//   and str() prints the tree torchvision prints. The Bottleneck puts its stride on the 3x3
//   convolution (ResNet v1.5), as torchvision does. Parameter counts with 1000 classes:
//   resnet18 11,689,512, resnet34 21,797,672, resnet50 25,557,032. docs/resnet.md has the rest.
#include <array>
#include <memory>
#include <string>

#include "core/generator.h"
#include "nn/activation.h"
#include "nn/batchnorm.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/pooling.h"

namespace sg::models {

// torchvision's arguments of the same names (groups, width_per_group, dilation and norm_layer,
// the ResNeXt / wide variants, are not offered).
struct ResNetOptions {
  int64_t num_classes = 1000;
  // Starts the last BatchNorm of every residual block at weight 0, so each block begins as the
  // identity (Goyal et al., "Accurate, Large Minibatch SGD"); torchvision's default is off.
  bool zero_init_residual = false;
  Generator* generator = nullptr;  // draws the initial weights; the default generator when null
};

// Two 3x3 convolutions and a shortcut: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
// The shortcut is `downsample` (a 1x1 convolution with the block's stride, then a BatchNorm) when
// the block changes the resolution or the width, else x itself.
class BasicBlock : public nn::Module {
public:
  static constexpr int64_t expansion = 1;  // output channels = planes * expansion
  BasicBlock(int64_t in_channels, int64_t planes, int64_t stride, std::shared_ptr<nn::Sequential> downsample,
             Generator* generator);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "BasicBlock"; }

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::Sequential> downsample;  // null when the shortcut is the identity
};

// 1x1 (narrow to planes), 3x3 (with the stride), 1x1 (widen to 4 * planes), each followed by a
// BatchNorm, plus the shortcut as in BasicBlock.
class Bottleneck : public nn::Module {
public:
  static constexpr int64_t expansion = 4;
  Bottleneck(int64_t in_channels, int64_t planes, int64_t stride, std::shared_ptr<nn::Sequential> downsample,
             Generator* generator);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Bottleneck"; }

  std::shared_ptr<nn::Conv2d> conv1, conv2, conv3;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2, bn3;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::Sequential> downsample;  // null when the shortcut is the identity
};

enum class ResNetBlock { basic, bottleneck };

// Input [N, 3, H, W] (any H, W >= 32 or so; 224 x 224 for ImageNet) -> logits [N, num_classes]:
//   conv1 7x7/2 (64) bn1 relu maxpool 3x3/2         -> [N, 64, H/4, W/4]
//   layer1 .. layer4: blocks[i] blocks of 64, 128, 256, 512 planes, the first block of layer2..4
//                     with stride 2                  -> [N, 512 * expansion, H/32, W/32]
//   avgpool (1, 1), flatten, fc                      -> [N, num_classes]
// Initialisation as torchvision: convolutions kaiming_normal_(mode fan_out, relu), BatchNorm
// weight 1 and bias 0, fc nn::Linear's default.
class ResNet : public nn::Module {
public:
  ResNet(ResNetBlock block, std::array<int64_t, 4> blocks, ResNetOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ResNet"; }

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::MaxPool2d> maxpool;
  std::shared_ptr<nn::Sequential> layer1, layer2, layer3, layer4;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Linear> fc;
  // Run every residual block of layer1 .. layer4 through autograd::checkpoint (docs/memory.md):
  // only each block's input is kept and its activations are recomputed in backward, one block at
  // a time — less memory than keeping a whole stage's, for one more forward of the blocks. The
  // stem (conv1 .. maxpool) and the head run plainly. The BatchNorms' running statistics still move
  // once per step (Note [BatchNorm under activation checkpointing] in nn/batchnorm.h), so a
  // checkpointed step leaves the model as a plain one does.
  bool activation_checkpointing = false;

private:
  void initialize(const ResNetOptions& options);
  Tensor run_stage(const std::shared_ptr<nn::Sequential>& stage, const Tensor& input) const;
};

std::shared_ptr<ResNet> resnet18(ResNetOptions options = {});  // BasicBlock, [2, 2, 2, 2]
std::shared_ptr<ResNet> resnet34(ResNetOptions options = {});  // BasicBlock, [3, 4, 6, 3]
std::shared_ptr<ResNet> resnet50(ResNetOptions options = {});  // Bottleneck, [3, 4, 6, 3]
// "resnet18", "resnet34" or "resnet50"; anything else is an sg::Error listing the choices.
std::shared_ptr<ResNet> make_resnet(const std::string& name, ResNetOptions options = {});

}  // namespace sg::models
