// tmcra-memd's connection threads: the bounded queue of accepted connections.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

#include "memory/server/connection_pool.h"

using tmcra::memd::ConnectionPool;

namespace {

using namespace std::chrono_literals;

// Holds the pool's one thread until Open().
struct Gate {
  std::promise<void> opened;
  std::shared_future<void> wait = opened.get_future().share();
  void Open() { opened.set_value(); }
};

// One thread busy on `gate`, then `queued` tasks waiting (each counts into `ran`).
void Fill(ConnectionPool& pool, Gate& gate, int queued, std::atomic<int>& ran) {
  std::promise<void> started;
  pool.Enqueue([&gate, &started] {
    started.set_value();
    gate.wait.wait();
  });
  started.get_future().wait();  // the thread has taken it: the queue is empty again
  for (int i = 0; i < queued; ++i) pool.Enqueue([&ran] { ++ran; });
}

}  // namespace

TEST_CASE("connection pool: past its bound, Enqueue waits until a thread takes a task") {
  ConnectionPool pool(1, 2);
  Gate gate;
  std::atomic<int> ran{0};
  Fill(pool, gate, 2, ran);
  REQUIRE(pool.queued() == 2);
  auto third = std::async(std::launch::async, [&] { pool.Enqueue([&ran] { ++ran; }); });
  // Still waiting after a while (the accept loop is paused), and counted once.
  CHECK(third.wait_for(200ms) == std::future_status::timeout);
  CHECK(pool.waits() == 1);
  CHECK(pool.queued() == 2);
  gate.Open();  // the thread takes the next task: room for the third
  REQUIRE(third.wait_for(10s) == std::future_status::ready);
  pool.Shutdown();
  CHECK(ran == 3);
}

TEST_CASE("connection pool: Release lets a waiting Enqueue through, and every later one") {
  ConnectionPool pool(1, 1);
  Gate gate;
  std::atomic<int> ran{0};
  Fill(pool, gate, 1, ran);
  auto waiting = std::async(std::launch::async, [&] { pool.Enqueue([&ran] { ++ran; }); });
  REQUIRE(waiting.wait_for(100ms) == std::future_status::timeout);
  pool.Release();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  for (int i = 0; i < 5; ++i) pool.Enqueue([&ran] { ++ran; });  // never blocks now
  CHECK(pool.queued() == 7);
  gate.Open();
  pool.Shutdown();
  CHECK(ran == 7);
}

TEST_CASE("connection pool: Shutdown runs every queued task, and a task that throws keeps its thread") {
  ConnectionPool pool(1, 100);
  std::atomic<int> ran{0};
  pool.Enqueue([] { throw std::runtime_error("out of a connection"); });
  for (int i = 0; i < 10; ++i) pool.Enqueue([&ran] { ++ran; });
  pool.Shutdown();
  CHECK(ran == 10);
  pool.Shutdown();  // again: nothing to do
}
