"""The timed training loop of the PyTorch reference benches, measured as bench_models measures its own.

--device cpu|cuda puts the model and the batch there; --amp no|f16|bf16 runs the forward and the loss under
torch.autocast with that dtype (f16 with a GradScaler, as bench_models' accelerator does). On a GPU, f32 matrix
products and convolutions stay f32 unless --tf32 (PyTorch's own default runs cuDNN's in TF32; syncgrad's runs
neither in TF32 unless asked, so the like-for-like comparison turns both of PyTorch's switches off or on). Warm-up steps are not
timed; on a GPU every timed step ends with torch.cuda.synchronize(), so the time is the GPU's work, not the time
to queue it. Returns the median ms/step and the losses of the first and the last step (a loss that does not fall
says the step does not train).
"""
import statistics
import time
from dataclasses import dataclass

import torch

LOW_PRECISION = {"f16": torch.float16, "bf16": torch.bfloat16}


def add_arguments(parser):
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--amp", default="no", choices=["no", *LOW_PRECISION])
    parser.add_argument("--tf32", action="store_true", help="GPU: f32 matmuls and convolutions may use TF32")


@dataclass
class Result:
    ms_per_step: float
    first_loss: float
    last_loss: float

    def json_fields(self, args):
        return {"device": args.device, "amp": args.amp, "tf32": args.tf32, "ms_per_step": round(self.ms_per_step, 3),
                "loss_first": round(self.first_loss, 6), "loss_last": round(self.last_loss, 6)}


def train(model, optimizer, compute_loss, args, warmup, steps, clip_grad_norm=None):
    """`warmup` + `steps` steps of optimizer over compute_loss() (the forward and the loss of one batch)."""
    device_type = torch.device(args.device).type
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    dtype = LOW_PRECISION.get(args.amp)
    scaler = torch.amp.GradScaler(device_type, enabled=args.amp == "f16")
    times, losses = [], []
    for step in range(warmup + steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype, enabled=dtype is not None):
            loss = compute_loss()
        scaler.scale(loss).backward()
        if clip_grad_norm is not None:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        if device_type == "cuda":
            torch.cuda.synchronize()
        if step >= warmup:
            times.append((time.perf_counter() - start) * 1000)
        if step in (0, warmup + steps - 1):
            losses.append(loss.item())
    return Result(statistics.median(times), losses[0], losses[-1])
