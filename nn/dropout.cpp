#include "nn/dropout.h"

#include <sstream>

#include "nn/functional.h"

namespace sg::nn {

Dropout::Dropout(double p, Generator* generator) : p(p), generator(generator) {
  SG_CHECK(p >= 0 && p <= 1, "Dropout: probability must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& input) { return functional::dropout(input, p, is_training(), generator); }

std::string Dropout::extra_repr() const {
  std::ostringstream out;
  out << "p=" << p;
  return out.str();
}

}  // namespace sg::nn
