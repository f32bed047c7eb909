// The connection threads of tmcra-memd: a fixed pool with a bounded queue of accepted
// connections waiting for a thread.
//
// httplib's accept loop hands every accepted connection to its task queue and accepts the next
// at once; its own ThreadPool queues without a bound, so a flood of connections that send
// nothing grows the process by one descriptor each until it runs out of descriptors (and then
// the store cannot open a file either). Here, past `max_queued` waiting connections, Enqueue
// blocks the accept loop until a thread frees up: further connections wait in the kernel's
// listen backlog, which costs the process nothing, and beyond that the kernel refuses them.
//
// Release() (at shutdown) lifts the bound so the accept loop can finish; Shutdown() lets the
// threads drain the queue, then joins them (as httplib's ThreadPool does).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tmcra::memd {

class ConnectionPool {
 public:
  ConnectionPool(size_t threads, size_t max_queued);
  ~ConnectionPool();  // Shutdown()
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // Queues `task` for a thread; blocks while `max_queued` tasks already wait (until a thread
  // takes one, or Release()). After Shutdown() it runs `task` on the calling thread. A task
  // that throws ends the process (std::terminate), as in httplib's own pool.
  void Enqueue(std::function<void()> task);
  // From now on Enqueue never blocks. Safe from any thread, any number of times.
  void Release();
  // Runs every queued task, then joins the threads. Idempotent; call it from one thread (the
  // accept loop's, or the destructor's).
  void Shutdown();

  size_t queued() const;
  // How many times Enqueue had to wait for room (for the warning and the tests).
  size_t waits() const;

 private:
  void Work();

  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable has_task_;
  std::condition_variable has_room_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool released_ = false;                    // guarded by mu_
  bool shutdown_ = false;                    // guarded by mu_
  size_t waits_ = 0;                         // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace tmcra::memd
