#include "dist/backward_timeline.h"

namespace sg::dist {

namespace {
double milliseconds_between(ChromeTrace::Clock::time_point begin, ChromeTrace::Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - begin).count();
}
}  // namespace

void BackwardTimeline::trace_to(const std::string& path, int steps) {
  SG_CHECK(steps > 0, "DistributedDataParallel: trace steps must be positive, got ", steps);
  trace_ = std::make_unique<ChromeTrace>(group_.rank());
  trace_path_ = path;
  trace_steps_left_ = steps;
}

void BackwardTimeline::backward_started() { backward_started_ = Clock::now(); }

void BackwardTimeline::bucket_ready(size_t bucket) {
  if (bucket >= bucket_ready_at_.size()) bucket_ready_at_.resize(bucket + 1);
  bucket_ready_at_[bucket] = Clock::now();
}

void BackwardTimeline::backward_finished() { backward_finished_ = Clock::now(); }

void BackwardTimeline::gradients_averaged(const std::vector<Bucket>& buckets) {
  const Clock::time_point averaged = Clock::now();
  last_step_times_ = {};
  last_step_times_.backward_ms = milliseconds_between(backward_started_, backward_finished_);
  last_step_times_.wait_ms = milliseconds_between(backward_finished_, averaged);
  for (const Bucket& bucket : buckets) {
    const auto timing = bucket.work->timing();
    last_step_times_.all_reduce_ms += milliseconds_between(timing.started, timing.finished);
  }
  if (trace_) record_trace(buckets, averaged);
}

void BackwardTimeline::record_trace(const std::vector<Bucket>& buckets, Clock::time_point averaged) {
  trace_->add_span("backward", "backward", backward_started_, backward_finished_);
  trace_->add_span("backward", "wait for all-reduce", backward_finished_, averaged);
  for (size_t b = 0; b < buckets.size(); ++b) {
    const auto timing = buckets[b].work->timing();
    if (timing.finished == Clock::time_point{}) continue;  // the backend keeps no times
    const std::string detail =
        std::to_string(buckets[b].params.size()) + " tensors, " +
        std::to_string(buckets[b].buffer.numel() * buckets[b].buffer.element_size()) + " bytes, ready " +
        std::to_string(milliseconds_between(backward_started_, bucket_ready_at_[b])) + " ms after backward began";
    trace_->add_span("all-reduce", "all_reduce bucket " + std::to_string(b), timing.started, timing.finished, detail);
  }
  if (--trace_steps_left_ == 0) {
    trace_->gather_and_write(group_, trace_path_);  // a collective, at the same step on every rank
    trace_.reset();
  }
}

}  // namespace sg::dist
