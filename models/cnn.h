#pragma once
// defines: models::CNN, models::BasicNet — the two Fashion-MNIST models — and
//          make_fashion_mnist_model, count_parameters.
#include <memory>
#include <string>

#include "nn/container.h"
#include "nn/conv.h"
#include "nn/dropout.h"
#include "nn/linear.h"

namespace sg::models {

// Input [N, 1, 28, 28] -> logits [N, 10]:
//   Conv(1->32, k5, p2) BatchNorm ReLU MaxPool2   -> [N, 32, 14, 14]
//   Conv(32->64, k5, p2) BatchNorm ReLU MaxPool2  -> [N, 64, 7, 7]
//   Flatten Linear(3136->64) ReLU Linear(64->10)
// A Sequential, so its state_dict keys ("0.weight", "1.running_mean", ...) are those of the same
// nn.Sequential in PyTorch.
std::shared_ptr<nn::Sequential> CNN();

// PyTorch's examples/mnist Net: input [N, 1, 28, 28] -> log-probabilities [N, 10].
//   Conv(1->32, k3) ReLU Conv(32->64, k3) ReLU MaxPool2 Dropout(0.25) Flatten
//   Linear(9216->128) ReLU Dropout(0.5) Linear(128->10) log_softmax
class BasicNet : public nn::Module {
public:
  BasicNet();
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "BasicNet"; }

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Dropout> dropout1, dropout2;
  std::shared_ptr<nn::Linear> fc1, fc2;
};

// "cnn" or "basicnet"; anything else is an sg::Error listing the choices.
std::shared_ptr<nn::Module> make_fashion_mnist_model(const std::string& name);

int64_t count_parameters(const nn::Module& model);

}  // namespace sg::models
