#include "models/cnn.h"

#include "autograd/ops_conv.h"
#include "autograd/ops_pointwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "nn/activation.h"
#include "nn/basic.h"
#include "nn/batchnorm.h"
#include "nn/pooling.h"

namespace sg::models {

std::shared_ptr<nn::Sequential> CNN() {
  using std::make_shared;
  return make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      make_shared<nn::Conv2d>(1, 32, 5, nn::Conv2dOptions{.padding = 2}), make_shared<nn::BatchNorm2d>(32),
      make_shared<nn::ReLU>(), make_shared<nn::MaxPool2d>(2),
      make_shared<nn::Conv2d>(32, 64, 5, nn::Conv2dOptions{.padding = 2}), make_shared<nn::BatchNorm2d>(64),
      make_shared<nn::ReLU>(), make_shared<nn::MaxPool2d>(2), make_shared<nn::Flatten>(),
      make_shared<nn::Linear>(3136, 64), make_shared<nn::ReLU>(), make_shared<nn::Linear>(64, 10)});
}

BasicNet::BasicNet() {
  conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, 32, 3));
  conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(32, 64, 3));
  dropout1 = register_module("dropout1", std::make_shared<nn::Dropout>(0.25));
  dropout2 = register_module("dropout2", std::make_shared<nn::Dropout>(0.5));
  fc1 = register_module("fc1", std::make_shared<nn::Linear>(9216, 128));
  fc2 = register_module("fc2", std::make_shared<nn::Linear>(128, 10));
}

Tensor BasicNet::forward(const Tensor& input) {
  Tensor x = relu((*conv1)(input));
  x = relu((*conv2)(x));
  x = (*dropout1)(max_pool2d(x, 2));
  x = relu((*fc1)(flatten(x, 1)));
  x = (*fc2)((*dropout2)(x));
  return log_softmax(x, 1);
}

std::shared_ptr<nn::Module> make_fashion_mnist_model(const std::string& name) {
  if (name == "cnn") return CNN();
  if (name == "basicnet") return std::make_shared<BasicNet>();
  SG_FAIL("make_fashion_mnist_model: unknown model '", name, "' (choices: cnn, basicnet)");
}

int64_t count_parameters(const nn::Module& model) {
  int64_t count = 0;
  for (const Tensor& p : model.parameters()) count += p.numel();
  return count;
}

}  // namespace sg::models
