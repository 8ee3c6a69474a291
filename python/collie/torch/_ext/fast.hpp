// fast.hpp - collie's torch backend in C++: the group torch calls, and its Work.
//
// torch 2.x sends every collective through its C++ dispatcher, which costs a
// Python backend ~4.6 us before the backend runs (docs/torch.md, "The latency
// floor on torch 2.x"); DDP's reducer, on any version, calls a Python backend
// from autograd's threads and takes the GIL for each bucket. FastGroup is
// what torch holds instead: a C++ group that issues the common case itself
// (one plain CPU tensor, a dtype and op collie computes natively) straight
// into libcollie, and hands everything else to the Python group
// (ProcessGroupCollie), which keeps every check, staging and error of the
// backend. Both issue on the same communicator under one lock (IssueLock), so
// operations still run in issue order whichever half issued them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 1
#error                                                                                             \
    "collie.torch's fast path needs torch 1.13 or >= 2.1 (2.0's c10d::Backend lacks what it overrides)"
#endif
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define COLLIE_TORCH_BASE c10d::Backend // torch 2.x: a group holds one backend per device type
#else
#define COLLIE_TORCH_BASE c10d::ProcessGroup // torch 1.x: the creator returns the group itself
#endif

extern "C" {
#include "collie.h"
}

namespace collie_torch {

namespace py = pybind11;

// How many groups hold isends/irecvs not yet issued (FastGroup::set_held):
// while any does, every group's calls go through the Python groups, which
// issue them first, and a wait issues them (collie.torch._held).
extern std::atomic<int> g_held_groups;
// collie.torch._held.flush_held, when any group holds some.
void flush_held();

// The communicator's issue lock (collie.h: one thread at a time issues on a
// communicator). Recursive: the Python group re-enters it. Python takes it as
// a context manager, releasing the GIL while it waits, so that a C++ issuer
// holding it never waits for the GIL.
class IssueLock {
public:
  void lock(); // releases the GIL while waiting when the caller holds it
  void unlock()
  {
    m_.unlock();
  }

private:
  std::recursive_mutex m_;
};

class Completer;

// A collie failure as a C++ exception: collie's message and its
// collie_result_t. The module translates it into collie.torch's
// CollieBackendError (a RuntimeError; torch 2.x: a DistBackendError) with
// that code, as the Python group raises.
struct CollieError : std::runtime_error {
  CollieError(const std::string &msg, int code) : std::runtime_error(msg), code(code)
  {
  }
  int code;
};

// One collie operation as torch's Work. Completes once: whichever of wait(),
// isCompleted() or the completer thread sees the end first settles it.
class FastWork : public c10d::Work {
public:
  FastWork(collie_work_t *w, const char *what, std::vector<at::Tensor> keep,
           std::vector<at::Tensor> result, std::shared_ptr<Completer> completer);
  ~FastWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override
  {
  }
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Waits on the collie handle (ms < 0: the operation's own deadline). True
  // once settled; false when only this wait ran out.
  bool finish(int64_t ms);
  // After finish: the error's collie_result_t and text (SUCCESS: none).
  int error_code() const
  {
    return rc_;
  }
  const std::string &error_text() const
  {
    return msg_;
  }
  const char *what() const
  {
    return what_;
  }

private:
  void complete(const c10::intrusive_ptr<c10::ivalue::Future> &fut);

  std::mutex wait_m_;    // held by the one thread inside collie_wait (and settling)
  mutable std::mutex m_; // the outcome and the future: never held while blocking
  collie_work_t *w_;     // freed once settled (under wait_m_)
  const char *what_;     // the torch operation's name, for messages
  std::vector<at::Tensor> keep_;
  std::vector<at::Tensor> result_;
  std::atomic<bool> done_{false};
  std::exception_ptr exc_;
  int rc_ = COLLIE_SUCCESS;
  std::string msg_;
  c10::intrusive_ptr<c10::ivalue::Future> fut_;
  std::shared_ptr<Completer> completer_;
};

// A Work the Python group hands back for a call from C++ (torch's Work
// around a Future, collie.torch._common.cpp_work), as torch's C++ callers
// get it: everything forwarded, except that wait() raises the operation's
// error, as Gloo's Works do. torch's Future-backed Work only waits, so a
// caller that waits on the Work rather than reading its future (the
// functional collectives' wait_tensor, under DTensor and tensor
// parallelism) would otherwise take a failed operation's output as done.
class CheckedWork : public c10d::Work {
public:
  explicit CheckedWork(c10::intrusive_ptr<c10d::Work> inner)
      : c10d::Work(-1, c10d::OpType::UNKNOWN), inner_(std::move(inner))
  {
  }
  bool isCompleted() override
  {
    return inner_->isCompleted();
  }
  bool isSuccess() const override
  {
    return inner_->isSuccess();
  }
  std::exception_ptr exception() const override
  {
    return inner_->exception();
  }
  int sourceRank() const override
  {
    return inner_->sourceRank();
  }
  std::vector<at::Tensor> result() override
  {
    return inner_->result();
  }
  void synchronize() override
  {
    inner_->synchronize();
  }
  bool wait(std::chrono::milliseconds timeout) override
  {
    bool r = inner_->wait(timeout);
    if (std::exception_ptr e = inner_->exception()) std::rethrow_exception(e);
    return r;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
  {
    return inner_->getFuture();
  }

private:
  c10::intrusive_ptr<c10d::Work> inner_;
};

// The thread that settles Works whose future was asked for (DDP's reducer
// and communication hooks wait on futures, never on the Work), in the order
// they were asked for.
class Completer : public std::enable_shared_from_this<Completer> {
public:
  void add(c10::intrusive_ptr<FastWork> w);
  // A Work dropped while running: its handle and tensors, kept until it ends.
  void adopt(collie_work_t *w, std::vector<at::Tensor> keep);
  // The thread ends once the queue is empty (the group is being destroyed).
  void stop();

private:
  struct Entry {
    c10::intrusive_ptr<FastWork> work;
    collie_work_t *orphan;
    std::vector<at::Tensor> keep;
  };
  void push(Entry e);
  void run();

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Entry> q_;
  bool running_ = false;
  bool stop_ = false;
};

class FastGroup : public COLLIE_TORCH_BASE {
public:
  FastGroup(py::object py_group, uintptr_t comm, int rank, int size,
            std::shared_ptr<IssueLock> lock);
  ~FastGroup() override;

  const std::string getBackendName() const override
  {
    return "collie";
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                           const c10d::BroadcastOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                           const c10d::AllreduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allreduce_coalesced(std::vector<at::Tensor> &tensors,
                      const c10d::AllreduceCoalescedOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                        const c10d::ReduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                           std::vector<at::Tensor> &inputs,
                                           const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                 const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                                     std::vector<at::Tensor> &inputs,
                                                     const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                        std::vector<at::Tensor> &inputs,
                                        const c10d::GatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                         std::vector<std::vector<at::Tensor>> &inputs,
                                         const c10d::ScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                std::vector<std::vector<at::Tensor>> &inputs,
                                                const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                       const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                               std::vector<int64_t> &outSplits,
                                               std::vector<int64_t> &inSplits,
                                               const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;
  // Batches of isend/irecv (batch_isend_irecv): the Python group holds them
  // between the two and issues them as one collie group at the end.
  void startCoalescing() override;
#if TORCH_VERSION_MAJOR >= 2
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 6
  // Without it torch 2.x's batch_isend_irecv calls isend and irecv one by
  // one, and the held ones could leave in two collie groups (the first,
  // a lone irecv, then blocks the isend behind it on both ranks).
  bool supportsCoalescing() const override
  {
    return true;
  }
#endif
  // torch 2.x's own entry points for what 1.13 sent to allreduce/allgather:
  // the Python group has them all.
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor> &tensors,
                                                  const c10d::AllreduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                                  const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                                  const c10d::ReduceScatterOptions &opts) override;
#else
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>> &reqs) override;
#endif
  void monitoredBarrier(const c10d::BarrierOptions &opts, bool waitAllRanks) override;

  // The group's collective count, which torch's ProcessGroupWrapper
  // (TORCH_DISTRIBUTED_DEBUG=DETAIL on torch 2.x) compares across ranks
  // before each collective: every collective this group is handed, counted
  // on entry whichever half runs it (point to point is not counted, as
  // Gloo's is not). Every rank starts at 0.
  void setSequenceNumberForGroup() override
  {
    seq_.store(0, std::memory_order_relaxed);
  }
  uint64_t getSequenceNumberForGroup() override
  {
    return seq_.load(std::memory_order_relaxed);
  }

#if COLLIE_TORCH_BACKEND_ABORT
  // Newer torch's destroy_process_group and _abort_process_group reach the
  // backend through these: the Python group frees or aborts the
  // communicator (both idempotent, and no-ops once it is gone).
  void shutdown() override;
  void abort() override;
#endif

  // Called by the Python group, holding the issue lock, before it frees the
  // communicator: later calls here go to the Python group, which refuses them.
  void detach();
  // The Python group holds sends and receives not yet issued: every group's
  // calls go through the Python groups, which issue them first (issue order).
  void set_held(bool held)
  {
    if (held_.exchange(held, std::memory_order_acq_rel) != held)
      g_held_groups.fetch_add(held ? 1 : -1, std::memory_order_acq_rel);
  }
  py::object python_group() const;
  uint64_t fast_calls() const
  {
    return fast_calls_.load(std::memory_order_relaxed);
  }

private:
  // Issues a collie call under the issue lock; null when the Python group
  // must take the call (detached, sends held).
  template <typename F>
  // p2p ("send", "recv"): only when torch's dist.send/dist.recv wait at
  // once; isend/irecv stay with the Python group, which batches them.
  // told: torch's options said the caller waits at once (no frame to read).
  c10::intrusive_ptr<c10d::Work> issue(const char *what, F &&call, std::vector<at::Tensor> keep,
                                       std::vector<at::Tensor> result, const char *p2p = nullptr,
                                       bool told = false);
  template <typename... A> c10::intrusive_ptr<c10d::Work> delegate(const char *method, A &&...args);
  bool plain_peer(int peer, int tag) const;
  c10::intrusive_ptr<c10d::Work> p2p(bool is_send, std::vector<at::Tensor> &tensors, int peer,
                                     int tag);
  bool opts_for(std::chrono::milliseconds timeout, collie_opts_t *o, std::string *label,
                std::string *phase) const;

  py::object py_; // the ProcessGroupCollie (None once detached)
  std::atomic<collie_comm_t *> comm_;
  std::shared_ptr<IssueLock> lock_;
  std::shared_ptr<Completer> completer_;
  std::atomic<bool> held_{false};
  std::atomic<uint64_t> fast_calls_{0};
  std::atomic<uint64_t> seq_{0};
  void count_collective()
  {
    seq_.fetch_add(1, std::memory_order_relaxed);
  }
};

#if TORCH_VERSION_MAJOR >= 2
// The group torch holds on 2.x: torch's own ProcessGroup, with collie's
// backend (the FastGroup, or torch's debug wrapper around it) for every
// device type, which differs only in its name: torch's names itself by its
// backend type, "custom" for any plugin, which DDP's logging and torch's
// messages would report.
class NamedGroup : public c10d::ProcessGroup {
public:
  NamedGroup(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
             const c10::intrusive_ptr<c10d::Backend> &backend);

  const std::string getBackendName() const override
  {
    return "collie";
  }
};
#endif

// The category block open in collie.torch (process-wide, as the Python
// group's): the fast path charges its calls to it.
void set_context(bool open, int category, const std::string &label, bool has_label,
                 const std::string &phase, bool has_phase);

} // namespace collie_torch
