#include "memory/server/connection_pool.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace tmcra::memd {

ConnectionPool::ConnectionPool(size_t threads, size_t max_queued)
    : max_queued_(std::max<size_t>(1, max_queued)) {
  threads = std::max<size_t>(1, threads);
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

ConnectionPool::~ConnectionPool() { Shutdown(); }

void ConnectionPool::Enqueue(std::function<void()> task) {
  std::unique_lock lock(mu_);
  if (shutdown_) {
    // The threads may be gone (httplib never does this): run it here, so that the connection
    // it owns is closed rather than leaked.
    lock.unlock();
    task();
    return;
  }
  if (tasks_.size() >= max_queued_ && !released_) {
    ++waits_;
    if (waits_ == 1 || waits_ % 1000 == 0) {
      spdlog::warn("{} connections are waiting for a connection thread: accepting paused until "
                   "one frees up (--threads, --max-queued-connections; {} time(s) so far)",
                   tasks_.size(), waits_);
    }
    has_room_.wait(lock, [this] { return tasks_.size() < max_queued_ || released_ || shutdown_; });
    if (shutdown_) {
      lock.unlock();
      task();
      return;
    }
  }
  tasks_.push_back(std::move(task));
  lock.unlock();
  has_task_.notify_one();
}

void ConnectionPool::Release() {
  {
    std::lock_guard lock(mu_);
    released_ = true;
  }
  has_room_.notify_all();
}

void ConnectionPool::Shutdown() {
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
  }
  has_task_.notify_all();
  has_room_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

size_t ConnectionPool::queued() const {
  std::lock_guard lock(mu_);
  return tasks_.size();
}

size_t ConnectionPool::waits() const {
  std::lock_guard lock(mu_);
  return waits_;
}

void ConnectionPool::Work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      has_task_.wait(lock, [this] { return !tasks_.empty() || shutdown_; });
      if (tasks_.empty()) return;  // shut down and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    has_room_.notify_one();
    // A connection's task is httplib's, which catches what the route handlers throw. Anything
    // else escaping it ends the process (std::terminate), as with httplib's own pool: caught
    // here, it would leak the connection's socket (httplib closes it only on a normal return)
    // and a slot Stop() waits for.
    task();
  }
}

}  // namespace tmcra::memd
