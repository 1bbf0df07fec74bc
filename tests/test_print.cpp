// Printing: the data part must read exactly as PyTorch's repr with default print options
// (expected strings follow torch/_tensor_str.py); syncgrad then always adds size, dtype, device.
#include <cmath>
#include <sstream>

#include "helpers.h"

using namespace sg;

namespace {
Tensor floats(const std::vector<float>& values, const Shape& shape = {}) { return tensor(values, shape); }
}  // namespace

TEST_CASE("a float matrix prints with a common width and aligned continuation lines") {
  CHECK(floats({0.1234f, -1.5f, 2.f, 3.f}, {2, 2}).str() ==
        "tensor([[ 0.1234, -1.5000],\n"
        "        [ 2.0000,  3.0000]], size=[2, 2], dtype=f32, device=cpu)");
}

TEST_CASE("floats that are all integers print with a trailing dot") {
  CHECK(floats({1.f, 2.f}).str() == "tensor([1., 2.], size=[2], dtype=f32, device=cpu)");
  CHECK(floats({-0.f, 1.f}).str() == "tensor([-0., 1.], size=[2], dtype=f32, device=cpu)");
  CHECK(floats({1.f, INFINITY}).str() == "tensor([1., inf], size=[2], dtype=f32, device=cpu)");
}

TEST_CASE("a 0-dim tensor prints its value without brackets") {
  CHECK(scalar_tensor(3.5).str() == "tensor(3.5000, size=[], dtype=f32, device=cpu)");
  CHECK(scalar_tensor(7, {DType::i64}).str() == "tensor(7, size=[], dtype=i64, device=cpu)");
}

TEST_CASE("scientific notation is used when the magnitudes demand it") {
  // min below 1e-4
  CHECK(tensor(std::vector<double>{1e-5, 1.0}).str() ==
        "tensor([1.0000e-05, 1.0000e+00], size=[2], dtype=f64, device=cpu)");
  // integral values above 1e8
  CHECK(floats({1.f, 1e9f}).str() == "tensor([1.0000e+00, 1.0000e+09], size=[2], dtype=f32, device=cpu)");
  // a range over 1000x; negative values widen the column
  CHECK(tensor(std::vector<double>{-0.001, 2.0}).str() ==
        "tensor([-1.0000e-03,  2.0000e+00], size=[2], dtype=f64, device=cpu)");
  // a range of 500x and nothing below 1e-4 stays fixed-point
  CHECK(tensor(std::vector<double>{0.001, 0.5}).str() == "tensor([0.0010, 0.5000], size=[2], dtype=f64, device=cpu)");
}

TEST_CASE("nan and inf print as Python spells them and do not set the width") {
  CHECK(floats({NAN, 1.5f, INFINITY, -INFINITY}).str() ==
        "tensor([   nan, 1.5000,    inf,   -inf], size=[4], dtype=f32, device=cpu)");
  CHECK(floats({-NAN}).str() == "tensor([nan], size=[1], dtype=f32, device=cpu)");
}

TEST_CASE("integer and bool tensors print as integers and True/False") {
  CHECK(arange(10).str() == "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], size=[10], dtype=i64, device=cpu)");
  CHECK(tensor(std::vector<int32_t>{-5, 10, 3}).str() == "tensor([-5, 10,  3], size=[3], dtype=i32, device=cpu)");
  CHECK(tensor(std::vector<bool>{true, false}).str() == "tensor([ True, False], size=[2], dtype=bool, device=cpu)");
  CHECK(tensor(std::vector<uint8_t>{255, 0}).str() == "tensor([255,   0], size=[2], dtype=u8, device=cpu)");
}

TEST_CASE("f16 and bf16 print through float") {
  // 0.1 is 0.0999755859375 in f16 (shows as 0.1000) and 0.10009765625 in bf16 (0.1001)
  CHECK(tensor(std::vector<Half>{Half(0.1f), Half(2.5f)}).str() ==
        "tensor([0.1000, 2.5000], size=[2], dtype=f16, device=cpu)");
  CHECK(tensor(std::vector<BFloat16>{BFloat16(0.1f), BFloat16(-3.f)}).str() ==
        "tensor([ 0.1001, -3.0000], size=[2], dtype=bf16, device=cpu)");
}

TEST_CASE("a 3-D tensor separates its matrices with a blank line") {
  CHECK(arange(8).reshape({2, 2, 2}).str() ==
        "tensor([[[0, 1],\n"
        "         [2, 3]],\n"
        "\n"
        "        [[4, 5],\n"
        "         [6, 7]]], size=[2, 2, 2], dtype=i64, device=cpu)");
}

TEST_CASE("a long vector wraps at 80 columns") {
  CHECK(arange(30, {DType::f32}).str() ==
        "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
        "        28., 29.], size=[30], dtype=f32, device=cpu)");
}

TEST_CASE("more than 1000 elements are summarised with 3 edge items per dim") {
  CHECK(zeros({2000}).str() == "tensor([0., 0., 0.,  ..., 0., 0., 0.], size=[2000], dtype=f32, device=cpu)");
  // The width comes from the shown items only, not from a wide hidden value.
  Tensor hidden_wide = arange(2000);
  hidden_wide.select(0, 1000).fill_(123456789);
  // (A suffix that would pass column 80 goes on a new line.)
  CHECK(hidden_wide.str() ==
        "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], size=[2000], dtype=i64,\n"
        "       device=cpu)");
  CHECK(arange(2000).reshape({100, 20}).str() ==
        "tensor([[   0,    1,    2,  ...,   17,   18,   19],\n"
        "        [  20,   21,   22,  ...,   37,   38,   39],\n"
        "        [  40,   41,   42,  ...,   57,   58,   59],\n"
        "        ...,\n"
        "        [1940, 1941, 1942,  ..., 1957, 1958, 1959],\n"
        "        [1960, 1961, 1962,  ..., 1977, 1978, 1979],\n"
        "        [1980, 1981, 1982,  ..., 1997, 1998, 1999]], size=[100, 20], dtype=i64,\n"
        "       device=cpu)");
  CHECK(zeros({7, 1, 200}, {DType::i64}).str() ==
        "tensor([[[0, 0, 0,  ..., 0, 0, 0]],\n"
        "\n"
        "        [[0, 0, 0,  ..., 0, 0, 0]],\n"
        "\n"
        "        [[0, 0, 0,  ..., 0, 0, 0]],\n"
        "\n"
        "        ...,\n"
        "\n"
        "        [[0, 0, 0,  ..., 0, 0, 0]],\n"
        "\n"
        "        [[0, 0, 0,  ..., 0, 0, 0]],\n"
        "\n"
        "        [[0, 0, 0,  ..., 0, 0, 0]]], size=[7, 1, 200], dtype=i64, device=cpu)");
}

TEST_CASE("a non-contiguous view prints in its logical order") {
  Tensor t = arange(6).reshape({2, 3}).t();
  CHECK(t.str() ==
        "tensor([[0, 3],\n"
        "        [1, 4],\n"
        "        [2, 5]], size=[3, 2], dtype=i64, device=cpu)");
  CHECK(arange(10).slice(0, 1, 10, 3).str() == "tensor([1, 4, 7], size=[3], dtype=i64, device=cpu)");
}

TEST_CASE("empty and undefined tensors print without data") {
  CHECK(zeros({0, 3}).str() == "tensor([], size=[0, 3], dtype=f32, device=cpu)");
  CHECK(Tensor().str() == "tensor(undefined)");
}

TEST_CASE("autograd state is printed: requires_grad for leaves, grad_fn for results") {
  Tensor x = floats({1.f, 2.f}).requires_grad_();
  CHECK(x.str() == "tensor([1., 2.], size=[2], dtype=f32, device=cpu, requires_grad=True)");
  CHECK((x * x).str() == "tensor([1., 4.], size=[2], dtype=f32, device=cpu, grad_fn=<MulBackward>)");
  {
    NoGradGuard no_grad;
    CHECK((x * x).str() == "tensor([1., 4.], size=[2], dtype=f32, device=cpu)");
  }
}

TEST_CASE("operator<< writes str()") {
  const Tensor t = floats({0.5f});
  std::ostringstream out;
  out << t;
  CHECK(out.str() == t.str());
}
