// fast_work.cpp - the C++ group's Work, and the thread that settles futures.
#include "fast.hpp"

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

namespace collie_torch {

namespace {

// The same text the Python group raises (collie's own message names the
// operation and the peer).
std::exception_ptr
error_of(const std::string &msg)
{
#if TORCH_VERSION_MAJOR >= 2
  return std::make_exception_ptr(c10::DistBackendError(
      c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg));
#else
  return std::make_exception_ptr(std::runtime_error(msg));
#endif
}

} // namespace

FastWork::FastWork(collie_work_t *w, const char *what, std::vector<at::Tensor> keep,
                   std::vector<at::Tensor> result, std::shared_ptr<Completer> completer)
    : c10d::Work(-1, c10d::OpType::UNKNOWN), w_(w), what_(what), keep_(std::move(keep)),
      result_(std::move(result)), completer_(std::move(completer))
{
  if (w_ == nullptr) { // a blocking call that has already run
    keep_.clear();
    done_.store(true, std::memory_order_release);
  }
}

FastWork::~FastWork()
{
  // Dropped while running: the operation goes on, and the tensors it reads or
  // writes must outlive it; the completer holds them until it has ended.
  if (w_ != nullptr) completer_->adopt(w_, std::move(keep_));
}

void
FastWork::settle(collie_result_t rc)
{
  if (rc != COLLIE_SUCCESS) {
    const char *text = collie_last_error(); // this thread's: it just waited
    rc_ = rc;
    msg_ = text && *text ? text : collie_result_string(rc);
    exc_ = error_of(msg_);
  }
  collie_work_free(w_);
  w_ = nullptr;
  keep_.clear();
  done_.store(true, std::memory_order_release);
  if (fut_) {
    if (exc_) {
      fut_->setError(exc_);
    } else {
      fut_->markCompleted(c10::IValue(result_));
    }
  }
}

bool
FastWork::finish(int64_t ms)
{
  if (done_.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> g(m_);
  if (done_.load(std::memory_order_relaxed)) return true;
  collie_result_t rc = collie_wait(w_, ms);
  if (rc == COLLIE_TIMEOUT && collie_test(w_) == COLLIE_IN_PROGRESS) return false;
  settle(rc);
  return true;
}

bool
FastWork::isCompleted()
{
  if (done_.load(std::memory_order_acquire)) return true;
  {
    std::lock_guard<std::mutex> g(m_);
    if (w_ != nullptr && collie_test(w_) == COLLIE_IN_PROGRESS) return false;
  }
  return finish(-1); // ended: collects the result without waiting
}

bool
FastWork::isSuccess() const
{
  std::lock_guard<std::mutex> g(m_);
  return done_.load(std::memory_order_acquire) && !exc_;
}

std::exception_ptr
FastWork::exception() const
{
  std::lock_guard<std::mutex> g(m_);
  return exc_;
}

std::vector<at::Tensor>
FastWork::result()
{
  wait(std::chrono::milliseconds(0)); // torch's kNoTimeout
  return result_;
}

bool
FastWork::wait(std::chrono::milliseconds timeout)
{
  int64_t ms = -1; // torch's "no timeout": the operation's own deadline holds
  if (timeout.count() > 0) ms = timeout.count(); // 0 is torch's kNoTimeout
  if (!finish(ms)) {
    throw std::runtime_error(std::string(what_) + ": still running after the wait's timeout of " +
                             std::to_string(ms) +
                             " ms (it goes on; wait again or let the group's timeout end it)");
  }
  if (exc_) std::rethrow_exception(exc_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future>
FastWork::getFuture()
{
  bool add = false;
  {
    std::lock_guard<std::mutex> g(m_);
    if (!fut_) {
      fut_ =
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
      if (done_.load(std::memory_order_acquire)) {
        if (exc_) {
          fut_->setError(exc_);
        } else {
          fut_->markCompleted(c10::IValue(result_));
        }
      } else {
        add = true;
      }
    }
  }
  if (add) completer_->add(c10::intrusive_ptr<FastWork>::reclaim_copy(this));
  return fut_;
}

void
Completer::push(Entry e)
{
  std::lock_guard<std::mutex> g(m_);
  q_.push_back(std::move(e));
  if (!running_) {
    // The thread owns the completer, and ends once the queue is empty after
    // stop(); a Work dropped later (adopt) starts another to wait on it.
    running_ = true;
    std::thread([self = shared_from_this()] { self->run(); }).detach();
  }
  cv_.notify_one();
}

void
Completer::add(c10::intrusive_ptr<FastWork> w)
{
  push(Entry{std::move(w), nullptr, {}});
}

void
Completer::adopt(collie_work_t *w, std::vector<at::Tensor> keep)
{
  push(Entry{{}, w, std::move(keep)});
}

void
Completer::run()
{
  for (;;) {
    Entry e;
    {
      std::unique_lock<std::mutex> g(m_);
      cv_.wait(g, [this] { return stop_ || !q_.empty(); });
      if (q_.empty()) {
        running_ = false;
        return;
      }
      e = std::move(q_.front());
      q_.pop_front();
    }
    // Each wait is bounded by its operation's deadline.
    if (e.work) {
      e.work->finish(-1);
    } else {
      collie_wait(e.orphan, -1);
      collie_work_free(e.orphan);
    }
  }
}

void
Completer::stop()
{
  std::lock_guard<std::mutex> g(m_);
  stop_ = true;
  cv_.notify_one();
}

} // namespace collie_torch
