// tmcra-memd's connection threads: the bounded queue of accepted connections.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "memory/server/connection_pool.h"

using tmcra::memd::ConnectionPool;

namespace {

using namespace std::chrono_literals;

// Holds the pool's one thread until Open(); opened at the latest when it goes out of scope
// (with the pool released), so a failed check ends the test instead of hanging it.
struct Gate {
  explicit Gate(ConnectionPool& p) : pool(p) {}
  ~Gate() {
    pool.Release();
    Open();
  }
  void Open() {
    if (!open.exchange(true)) opened.set_value();
  }
  ConnectionPool& pool;
  std::atomic<bool> open{false};
  std::promise<void> opened;
  std::shared_future<void> wait = opened.get_future().share();
};

// The pool's thread busy on `gate`, then `queued` tasks waiting (each counts into `ran`).
void Fill(ConnectionPool& pool, Gate& gate, int queued, std::atomic<int>& ran) {
  std::promise<void> started;
  auto taken = started.get_future();
  pool.Enqueue([&gate, &started] {
    started.set_value();
    gate.wait.wait();
  });
  taken.wait();  // the thread has taken it: the queue is empty again
  for (int i = 0; i < queued; ++i) pool.Enqueue([&ran] { ++ran; });
}

// Polls `done` for up to 10 s.
template <class F>
bool Eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace

TEST_CASE("connection pool: past its bound, Enqueue waits until a thread takes a task") {
  ConnectionPool pool(1, 2);
  Gate gate(pool);
  std::atomic<int> ran{0};
  Fill(pool, gate, 2, ran);
  REQUIRE(pool.queued() == 2);
  auto third = std::async(std::launch::async, [&] { pool.Enqueue([&ran] { ++ran; }); });
  REQUIRE(Eventually([&] { return pool.waits() == 1; }));  // the accept loop is paused
  CHECK(third.wait_for(50ms) == std::future_status::timeout);
  CHECK(pool.queued() == 2);
  gate.Open();  // the thread takes the next task: room for the third
  REQUIRE(third.wait_for(10s) == std::future_status::ready);
  pool.Shutdown();
  CHECK(ran == 3);
  CHECK(pool.waits() == 1);
}

TEST_CASE("connection pool: Release lets a waiting Enqueue through, and every later one") {
  ConnectionPool pool(1, 1);
  Gate gate(pool);
  std::atomic<int> ran{0};
  Fill(pool, gate, 1, ran);
  auto waiting = std::async(std::launch::async, [&] { pool.Enqueue([&ran] { ++ran; }); });
  REQUIRE(Eventually([&] { return pool.waits() == 1; }));
  pool.Release();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  for (int i = 0; i < 5; ++i) pool.Enqueue([&ran] { ++ran; });  // never blocks now
  CHECK(pool.queued() == 7);
  gate.Open();
  pool.Shutdown();
  CHECK(ran == 7);
}

TEST_CASE("connection pool: Shutdown runs every queued task, and a later task runs on the caller") {
  ConnectionPool pool(2, 100);
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i) pool.Enqueue([&ran] { ++ran; });
  pool.Shutdown();
  CHECK(ran == 20);
  const auto caller = std::this_thread::get_id();
  std::thread::id ran_on;
  pool.Enqueue([&] { ran_on = std::this_thread::get_id(); });  // its socket would leak otherwise
  CHECK(ran_on == caller);
  pool.Shutdown();  // again: nothing to do
}
