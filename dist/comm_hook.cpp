#include "dist/comm_hook.h"

#include <atomic>
#include <exception>
#include <mutex>

namespace sg::dist {

namespace {

class ContinuedWork final : public Work {
public:
  ContinuedWork(WorkPtr work, std::function<void()> continuation)
      : work_(std::move(work)),
        continuation_(std::move(continuation)) {}

  // The first caller waits and runs the continuation; later ones find it done and share its error.
  void wait() override {
    std::lock_guard<std::mutex> lock(wait_mutex_);
    if (!done_) {
      try {
        work_->wait();
        continuation_();
      } catch (...) {
        error_ = std::current_exception();
      }
      done_ = true;
    }
    if (error_) std::rethrow_exception(error_);
  }
  bool is_completed() const override { return done_; }
  Timing timing() const override { return work_->timing(); }

private:
  WorkPtr work_;
  std::function<void()> continuation_;
  std::mutex wait_mutex_;
  std::atomic<bool> done_ = false;  // read without the lock by is_completed
  std::exception_ptr error_;
};

}  // namespace

WorkPtr then(WorkPtr work, std::function<void()> continuation) {
  SG_CHECK(work != nullptr, "dist::then: the Work to continue is null");
  return std::make_shared<ContinuedWork>(std::move(work), std::move(continuation));
}

}  // namespace sg::dist
