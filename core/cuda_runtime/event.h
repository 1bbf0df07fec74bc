#pragma once
// defines: cuda::Event — a marker in the GPU's queue of work (Note [One compute stream]): record
//          it after some kernels, then ask whether the GPU got there, wait for it, or time the
//          work between two events. GPU kernels run asynchronously, so a host clock around them
//          measures only how long they took to queue; bench/ times GPU steps with these.
//
//   cuda::Event start(true), stop(true);
//   start.record();
//   ... ops on GPU tensors ...
//   stop.record();
//   stop.synchronize();
//   double ms = start.elapsed_ms(stop);
//
// No CUDA header: the event is held as an opaque handle.
namespace sg::cuda {

class Event {
public:
  // `timing`: the event can be used with elapsed_ms (it then costs a little more to record).
  explicit Event(bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record();             // on the compute stream of the device it was created on
  bool query() const;        // has the GPU passed it (true when never recorded)
  void synchronize() const;  // blocks the host until the GPU has passed it
  // Milliseconds from this event to `later`, both recorded and passed, both timing events.
  double elapsed_ms(const Event& later) const;

  // For code with a CUDA stream of its own (the NCCL process group); `stream` is a cudaStream_t.
  void record_on(void* stream);            // record on `stream` instead of the compute stream
  void block(void* stream) const;          // `stream` waits for this event: the GPU waits, not the host
  void* handle() const { return event_; }  // the cudaEvent_t, for a caller that reads cudaEventQuery itself

private:
  // Unused in a build without CUDA, whose Event cannot be created (core/cuda_runtime/no_cuda.cpp).
  [[maybe_unused]] void* event_ = nullptr;  // a cudaEvent_t
  [[maybe_unused]] int device_ = 0;
};

}  // namespace sg::cuda
