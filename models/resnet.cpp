#include "models/resnet.h"

#include "autograd/checkpoint.h"
#include "autograd/ops_pointwise.h"
#include "autograd/ops_shape.h"
#include "nn/init.h"

namespace sg::models {

namespace {

// A bias-free convolution with "same" padding for odd kernels (7x7 -> 3, 3x3 -> 1, 1x1 -> 0):
// every convolution of a ResNet is followed by a BatchNorm, whose bias makes a conv bias redundant.
std::shared_ptr<nn::Conv2d> conv(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
                                 Generator* generator) {
  return std::make_shared<nn::Conv2d>(
      in_channels, out_channels, kernel_size,
      nn::Conv2dOptions{.stride = stride, .padding = kernel_size / 2, .bias = false, .generator = generator});
}

// relu(out + shortcut), the shortcut being downsample(input) or input itself.
Tensor add_shortcut(const Tensor& out, const Tensor& input, const std::shared_ptr<nn::Sequential>& downsample,
                    nn::ReLU& relu) {
  return relu(add(out, downsample ? (*downsample)(input) : input));
}

// torchvision's _make_layer: `blocks` blocks of `planes`; the first takes the stride and, when the
// resolution or the width changes, a 1x1 convolution + BatchNorm shortcut ("downsample.0",
// "downsample.1"). Advances in_channels to the layer's output width.
template <typename Block>
std::shared_ptr<nn::Sequential> make_layer(int64_t& in_channels, int64_t planes, int64_t blocks, int64_t stride,
                                           Generator* generator) {
  const int64_t out_channels = planes * Block::expansion;
  std::shared_ptr<nn::Sequential> downsample;
  if (stride != 1 || in_channels != out_channels)
    downsample = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        conv(in_channels, out_channels, 1, stride, generator), std::make_shared<nn::BatchNorm2d>(out_channels)});
  auto layer = std::make_shared<nn::Sequential>();
  layer->push_back(std::make_shared<Block>(in_channels, planes, stride, downsample, generator));
  in_channels = out_channels;
  for (int64_t i = 1; i < blocks; ++i)
    layer->push_back(std::make_shared<Block>(in_channels, planes, 1, nullptr, generator));
  return layer;
}

}  // namespace

BasicBlock::BasicBlock(int64_t in_channels, int64_t planes, int64_t stride,
                       std::shared_ptr<nn::Sequential> downsample_layers, Generator* generator) {
  conv1 = register_module("conv1", conv(in_channels, planes, 3, stride, generator));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
  relu = register_module("relu", std::make_shared<nn::ReLU>());
  conv2 = register_module("conv2", conv(planes, planes, 3, 1, generator));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  if (downsample_layers) downsample = register_module("downsample", std::move(downsample_layers));
}

Tensor BasicBlock::forward(const Tensor& input) {
  const Tensor out = (*bn2)((*conv2)((*relu)((*bn1)((*conv1)(input)))));
  return add_shortcut(out, input, downsample, *relu);
}

Bottleneck::Bottleneck(int64_t in_channels, int64_t planes, int64_t stride,
                       std::shared_ptr<nn::Sequential> downsample_layers, Generator* generator) {
  conv1 = register_module("conv1", conv(in_channels, planes, 1, 1, generator));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
  conv2 = register_module("conv2", conv(planes, planes, 3, stride, generator));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  conv3 = register_module("conv3", conv(planes, planes * expansion, 1, 1, generator));
  bn3 = register_module("bn3", std::make_shared<nn::BatchNorm2d>(planes * expansion));
  relu = register_module("relu", std::make_shared<nn::ReLU>());
  if (downsample_layers) downsample = register_module("downsample", std::move(downsample_layers));
}

Tensor Bottleneck::forward(const Tensor& input) {
  Tensor out = (*relu)((*bn1)((*conv1)(input)));
  out = (*relu)((*bn2)((*conv2)(out)));
  out = (*bn3)((*conv3)(out));
  return add_shortcut(out, input, downsample, *relu);
}

ResNet::ResNet(ResNetBlock block, std::array<int64_t, 4> blocks, ResNetOptions options) {
  SG_CHECK(options.num_classes > 0, "ResNet: num_classes must be positive, got ", options.num_classes);
  for (int64_t count : blocks)
    SG_CHECK(count > 0, "ResNet: every layer needs at least one block, got [", blocks[0], ", ", blocks[1], ", ",
             blocks[2], ", ", blocks[3], "]");
  using LayerMaker = std::shared_ptr<nn::Sequential> (*)(int64_t&, int64_t, int64_t, int64_t, Generator*);
  const LayerMaker layer = block == ResNetBlock::basic ? &make_layer<BasicBlock> : &make_layer<Bottleneck>;
  Generator* generator = options.generator;
  int64_t channels = 64;  // the width entering the next layer
  conv1 = register_module("conv1", conv(3, channels, 7, 2, generator));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(channels));
  relu = register_module("relu", std::make_shared<nn::ReLU>());
  maxpool =
      register_module("maxpool", std::make_shared<nn::MaxPool2d>(3, nn::MaxPool2dOptions{.stride = 2, .padding = 1}));
  layer1 = register_module("layer1", layer(channels, 64, blocks[0], 1, generator));
  layer2 = register_module("layer2", layer(channels, 128, blocks[1], 2, generator));
  layer3 = register_module("layer3", layer(channels, 256, blocks[2], 2, generator));
  layer4 = register_module("layer4", layer(channels, 512, blocks[3], 2, generator));
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
  fc = register_module("fc", std::make_shared<nn::Linear>(channels, options.num_classes, true, generator));
  initialize(options);
}

void ResNet::initialize(const ResNetOptions& options) {
  // The BatchNorms already start at weight 1, bias 0 and fc keeps nn::Linear's default, as in
  // torchvision; only the convolutions change from their layer's default.
  // apply, not named_modules: shared_from_this is not available inside the constructor.
  apply([&](nn::Module& module) {
    if (auto* convolution = dynamic_cast<nn::Conv2d*>(&module))
      nn::init::kaiming_normal_(convolution->weight, 0.0, nn::init::FanMode::fan_out, nn::init::Nonlinearity::relu,
                                options.generator);
    if (!options.zero_init_residual) return;
    if (auto* basic = dynamic_cast<BasicBlock*>(&module)) nn::init::zeros_(basic->bn2->weight);
    if (auto* bottleneck = dynamic_cast<Bottleneck*>(&module)) nn::init::zeros_(bottleneck->bn3->weight);
  });
}

Tensor ResNet::forward(const Tensor& input) {
  SG_CHECK(input.dim() == 4 && input.size(1) == 3, "ResNet: expected images of shape [N, 3, H, W], got ",
           shape_str(input.sizes()));
  Tensor x = (*maxpool)((*relu)((*bn1)((*conv1)(input))));
  for (const std::shared_ptr<nn::Sequential>& stage : {layer1, layer2, layer3, layer4}) x = run_stage(stage, x);
  return (*fc)(flatten((*avgpool)(x), 1));
}

Tensor ResNet::run_stage(const std::shared_ptr<nn::Sequential>& stage, const Tensor& input) const {
  if (!activation_checkpointing) return (*stage)(input);
  // Each block is copied into the graph by shared_ptr: the recomputation runs after forward returns.
  Tensor x = input;
  for (const std::shared_ptr<nn::Module>& block : *stage)
    x = autograd::checkpoint([block](const Tensor& block_input) { return (*block)(block_input); }, x);
  return x;
}

std::shared_ptr<ResNet> resnet18(ResNetOptions options) {
  return std::make_shared<ResNet>(ResNetBlock::basic, std::array<int64_t, 4>{2, 2, 2, 2}, options);
}

std::shared_ptr<ResNet> resnet34(ResNetOptions options) {
  return std::make_shared<ResNet>(ResNetBlock::basic, std::array<int64_t, 4>{3, 4, 6, 3}, options);
}

std::shared_ptr<ResNet> resnet50(ResNetOptions options) {
  return std::make_shared<ResNet>(ResNetBlock::bottleneck, std::array<int64_t, 4>{3, 4, 6, 3}, options);
}

std::shared_ptr<ResNet> make_resnet(const std::string& name, ResNetOptions options) {
  if (name == "resnet18") return resnet18(options);
  if (name == "resnet34") return resnet34(options);
  if (name == "resnet50") return resnet50(options);
  SG_FAIL("make_resnet: unknown model '", name, "' (choices: resnet18, resnet34, resnet50)");
}

}  // namespace sg::models
