#pragma once
// defines: optim::load_fine_tuning_weights — what a fine-tuning run accepts as its starting
//          weights (train_resnet --weights): a state_dict of the same network, or a checkpoint this
//          project wrote, with only the head allowed to differ.
//
// Note [Starting weights for fine-tuning]
// nn::load_pretrained loads whatever matches and reports the rest, which is right for a library
// call but lets a run go wrong in silence: a file of another network (resnet18 weights for
// resnet50, a train_cnn checkpoint) loads little or nothing, and the run trains from random
// weights with the evidence buried in its log. A run asks for more: every tensor of the model
// outside the head is loaded from the file, and the file holds nothing the model lacks outside
// the head. The head (fc for torchvision's ResNets) may be dropped for another shape — the
// recipe's 1000 ImageNet classes into 5 — or be absent, and keeps its initialisation. A file
// save_checkpoint or Accelerator::save_state wrote (every tensor under "model." or "optimizer.")
// is read as its "model." tensors without the prefix; its optimizer state is not weights.
#include <string>

#include "nn/module.h"
#include "nn/pretrained.h"

namespace sg::optim {

// Loads `path` into `model` as Note [Starting weights for fine-tuning] says and returns what was
// loaded, dropped, missing and unexpected. Throws an sg::Error naming the file, the counts (loaded
// of expected tensors) and the first tensors that stood in the way when the rule does not hold;
// the model may then hold some of the file's tensors. `head_prefix` names the head's tensors
// ("fc." matches fc.weight and fc.bias).
nn::PretrainedReport load_fine_tuning_weights(nn::Module& model, const std::string& path,
                                              const std::string& head_prefix);

}  // namespace sg::optim
