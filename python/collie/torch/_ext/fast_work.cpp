// fast_work.cpp - the C++ group's Work, and the thread that settles futures.
#include "fast.hpp"

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

namespace collie_torch {

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

// Sets fut to the outcome. Called with no lock held: the future's callbacks
// (DDP's hooks, Python then()) run here and may call back into this Work.
void
FastWork::complete(const c10::intrusive_ptr<c10::ivalue::Future> &fut)
{
  if (exc_) {
    fut->setError(exc_);
  } else {
    fut->markCompleted(c10::IValue(result_));
  }
}

bool
FastWork::finish(int64_t ms)
{
  if (done_.load(std::memory_order_acquire)) return true;
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  // The tensors are let go of after both locks: freeing the last reference
  // to one whose Python object torch kept takes the GIL, which a caller of
  // isCompleted() may hold while it waits for wait_m_.
  std::vector<at::Tensor> drop;
  {
    std::lock_guard<std::mutex> wg(wait_m_); // one waiter on the handle at a time
    if (done_.load(std::memory_order_acquire)) return true;
    collie_result_t rc = collie_wait(w_, ms);
    if (rc == COLLIE_TIMEOUT && collie_test(w_) == COLLIE_IN_PROGRESS) return false;
    std::string msg;
    if (rc != COLLIE_SUCCESS) {
      const char *text = collie_last_error(); // this thread's: it just waited
      msg = text && *text ? text : collie_result_string(rc);
    }
    collie_work_free(w_);
    w_ = nullptr;
    drop.swap(keep_);
    std::lock_guard<std::mutex> g(m_);
    if (rc != COLLIE_SUCCESS) {
      rc_ = rc;
      msg_ = msg;
      exc_ = std::make_exception_ptr(CollieError(msg, rc));
    }
    done_.store(true, std::memory_order_release);
    fut = fut_;
  }
  if (fut) complete(fut);
  return true;
}

bool
FastWork::isCompleted()
{
  if (done_.load(std::memory_order_acquire)) return true;
  flush_held(); // (collie.torch._held: what it waits for may need them)
  {
    // A waiter inside collie_wait holds wait_m_: the operation is then still
    // running (or about to be settled by it); never block here.
    std::unique_lock<std::mutex> wg(wait_m_, std::try_to_lock);
    if (!wg.owns_lock()) return done_.load(std::memory_order_acquire);
    if (done_.load(std::memory_order_acquire)) return true;
    if (collie_test(w_) == COLLIE_IN_PROGRESS) return false;
  }
  return finish(-1); // ended: collects the result without waiting
}

bool
FastWork::isSuccess() const
{
  if (!const_cast<FastWork *>(this)->isCompleted()) return false;
  std::lock_guard<std::mutex> g(m_);
  return !exc_;
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
  if (!done_.load(std::memory_order_acquire)) flush_held();
  if (!finish(ms)) {
    throw CollieError(std::string(what_) + ": still running after the wait's timeout of " +
                          std::to_string(ms) +
                          " ms (it goes on; wait again or let the group's timeout end it)",
                      COLLIE_TIMEOUT);
  }
  if (exc_) std::rethrow_exception(exc_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future>
FastWork::getFuture()
{
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  bool add = false, done = false;
  {
    std::lock_guard<std::mutex> g(m_);
    if (fut_) return fut_;
    fut_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    fut = fut_;
    // Exactly one of this and finish() completes it: whichever sees the
    // other's half under m_.
    done = done_.load(std::memory_order_acquire);
    add = !done;
  }
  if (done) complete(fut);
  if (add) completer_->add(c10::intrusive_ptr<FastWork>::reclaim_copy(this));
  return fut;
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
    // Each wait ends at its operation's deadline (plus collie's grace); one
    // still running then (TIMEOUT, IN_PROGRESS) is waited on again: its
    // future must be set, and an orphan's tensors kept, until it has ended.
    if (e.work) {
      while (!e.work->finish(-1)) {
      }
    } else {
      while (collie_wait(e.orphan, -1) == COLLIE_TIMEOUT &&
             collie_test(e.orphan) == COLLIE_IN_PROGRESS) {
      }
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
