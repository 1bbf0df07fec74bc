#pragma once
// defines: resize_bilinear — a u8 [H, W, C] image resized with torch's antialiased bilinear filter
//          on uint8 images (_upsample_bilinear2d_aa, which torchvision.transforms.v2 runs on them),
//          bit for bit.
//
// Note [Resampling as torch does on uint8 images]
// torchvision.transforms.v2's resize (so its Resize and RandomResizedCrop) of a uint8 image on the
// CPU calls torch's _upsample_bilinear2d_aa on the uint8 tensor itself, which runs Pillow's
// algorithm. The passes are separable: the width first, then the height, a pass skipped when its
// size does not change. Output pixel i of a pass from n to m pixels is a weighted sum of the
// input pixels within the support of its centre c = s * (i + 0.5), s = n / m: the triangle filter
// 1 - |x| stretched by s when shrinking (support s: every input pixel contributes, which is the
// antialiasing) and of support 1 when enlarging (plain bilinear), normalised to sum to 1. The
// weights are computed in double, then made integers with as many fraction bits p as the largest
// one allows below 2^15; a pixel is (sum of input * weight + 2^(p-1)) >> p, clamped to [0, 255],
// so each pass rounds to u8. We compute the same weights with the same double steps and the same
// integer sums, so the result equals torch's exactly (tests/test_image_transforms.cpp checks it
// against constants made by tests/reference/make_transform_constants.py). Measured on random
// images: Pillow's own resize differs from this by one level in ~0.2% of the pixels when
// shrinking (0 when enlarging), and torchvision.transforms (v1), which resamples in float32 and
// rounds once, by one level in ~15% of them.
#include <cstdint>

#include "core/tensor.h"

namespace sg::data {

// `image` (u8 [H, W, C], any strides) resized to [height, width, C].
Tensor resize_bilinear(const Tensor& image, int64_t height, int64_t width);

}  // namespace sg::data
