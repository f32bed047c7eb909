// The MCP stdio server: newline-delimited JSON-RPC 2.0 over a pair of file descriptors.
//
// Threads: the input is read on a pooled thread, which answers initialize, ping, tools/list and
// errors itself. The thread that reads a chunk of input holding a tools/call answers the
// chunk's first call itself once the chunk is handled, so a call does not wait for a thread to
// wake; the chunk's other calls go to pooled threads as they are read. While it answers, a
// standby thread waits on a timer: if the call outlasts ServerOptions::hand_off_delay (2 ms),
// the standby takes the reading over (leader/follower, deferred). So a tool can send a
// server-to-client request (elicitation/create) and wait while the reader routes the answer
// back, and a message that comes during a long call is read after the delay and a thread's
// wake-up. A short call wakes no other thread. Output goes through one writer (a mutex, one
// line per message, written in full).
//
// Protocol lifecycle: until initialize is answered, tools/list and tools/call are refused
// (-32600); ping and initialize are served, server/discover and unknown methods get -32601.
//
// Lifecycle: Run() returns 0 on end of input, on SIGTERM/SIGINT/SIGHUP (after
// InstallSignalHandlers), or when the output is gone (EPIPE); 1 when reading the input failed.
// In-flight calls get a short grace to finish, then are cancelled; the whole shutdown takes
// well under a second.
//
// Knows nothing about memory: tools register themselves with AddTool().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "src/mcp/jsonrpc.h"
#include "src/mcp/line_reader.h"
#include "src/mcp/tool.h"
#include "src/mcp/tool_set.h"

namespace tmcra::mcp {

struct ServerOptions {
  std::string name = "tmcra-mcp";
  std::string title;
  std::string version;
  std::string instructions;
  // Run tools on the reading thread (for the fuzzer and unit tests): no elicitation then.
  bool inline_tools = false;
  // How long the reading thread answers a call itself before a standby thread takes the
  // reading over (see Server). Zero: the reading is handed to another thread at once on every
  // call (as also whenever the timer or the standby cannot be had).
  std::chrono::microseconds hand_off_delay{2000};
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The tools served. REQUIRES: tools are added before Run().
  ToolSet& tools() { return tools_; }
  void AddTool(ToolSpec spec, ToolHandler handler) {
    tools_.Add(std::move(spec), std::move(handler));
  }

  // Serves until end of input, a termination signal or a broken output. Returns the exit code:
  // 0, or 1 when reading the input failed. Call once per Server.
  int Run(int in_fd, int out_fd);

  // Handles one framed line as if read from the input; responses go to `out_fd` given to
  // SetOutputForTest(). For unit tests and the fuzzer (with inline_tools).
  void HandleLineForTest(std::string_view line, bool oversized = false);
  void SetOutputForTest(int out_fd);

  // SIGTERM, SIGINT and SIGHUP end Run(); SIGPIPE is ignored. Call once, from main.
  static void InstallSignalHandlers();

  // When `out_fd` is a pipe (Python and Rust hosts, e.g. Codex; Node hosts give a socket),
  // widens it to kOutputPipeBytes (else half of that) if it is smaller: a 64 KiB pipe holds
  // less than one recall's answer line (about 75 kB), whose write would then wait for the host
  // to read the first part. Not more: a pipe's pages count against its creator's
  // pipe-user-pages-soft (64 MiB), past which every new pipe of that user is made tiny. Run()
  // does it; best effort.
  static void WidenOutputPipe(int out_fd);
  static constexpr int kOutputPipeBytes = 256 * 1024;

  std::string negotiated_version() const;

 private:
  struct Call;     // one in-flight tools/call
  struct Pending;  // one server-to-client request awaiting its answer
  class CallContext;

  void HandleLine(std::string_view line, bool oversized);
  // Returns the response, or nothing (a notification, a response to us, or async work).
  // `bad_number`: the message held a number no double holds (read as null), at this path from
  // the message (ParsedLine::number_paths); it is then refused as invalid input, with its id
  // when that could be read, and a response to us becomes an error response.
  std::optional<json> HandleMessage(const json& message, bool in_batch,
                                    const json* bad_number = nullptr);
  // `bad_number`: as for HandleMessage, always inside params.
  std::optional<json> HandleRequest(const json& id, const std::string& method, const json& params,
                                    bool in_batch, const json* bad_number = nullptr);
  // A request of a method we serve with a number no double holds at `path` (inside params): a
  // tool error naming the field in a tools/call's arguments, else -32602.
  json RefuseNumberOutOfRange(const json& id, const std::string& method, const json& params,
                              const json& path) const;
  void HandleNotification(const std::string& method, const json& params);
  void HandleResponse(const json& message);
  // `number_paths`: ParsedLine::number_paths of the batch (each starts with a message's index).
  void HandleBatch(const json& batch, const std::vector<json>& number_paths);

  json Initialize(const json& params);
  // Whether initialize was answered (tools are served only then).
  bool InitializeAnswered() const;
  json ListTools(const json& id, const json& params);
  // What a tools/call came to: a JSON-RPC error, a tool result (with the version it is shaped
  // for), or neither when the client cancelled it.
  struct CallOutcome {
    std::optional<json> error;
    std::optional<ToolResult> result;
    std::string version;
  };
  // Runs a call to the end.
  CallOutcome CallTool(const json& id, const json& params, const std::shared_ptr<Call>& call);
  // The call's response as a message (for a batch), or nothing when cancelled.
  std::optional<json> RunCall(const json& id, const json& params,
                              const std::shared_ptr<Call>& call);
  // Runs the call and writes its response line (nothing when cancelled): a successful result's
  // structured content is serialized once for both of its copies (SerializeToolResult), and
  // the result is freed only after the line is written.
  // `finish` runs once the line is written, before the result is freed.
  void RunCallAndWrite(const json& id, const json& params, const std::shared_ptr<Call>& call,
                       const std::function<void()>& finish);

  // Runs `work` on a pooled thread. A thread is added whenever every existing one is busy
  // (a tool may wait for a human through elicitation), so a call never waits for another; if
  // no thread can be started, the work waits for a busy one. Throws only when nothing was
  // queued (out of memory, or no thread at all).
  void StartWorker(std::function<void()> work);
  void PoolLoop();
  void StopWorkers();
  void Shutdown();
  // Reads the input and answers the first tools/call of a chunk itself; at the end of the
  // input (or a signal, or a broken output) it tells Run(). Runs on one pooled thread at a time.
  void ReaderLoop();
  // kHandedOn: another thread reads now; `call`, if set, is still to be run by this one.
  enum class ReadEnd { kHandedOn, kEnded, kFailed };
  ReadEnd ReadUntilCall(std::function<void()>& call);

  // The deferred hand-off. While the reading thread answers a call, a timer is armed for
  // the hand-off delay; a standby thread (StandbyLoop, one at a time) waits on it and, when it
  // fires, takes the reading over and starts the next standby. reading_turn_ decides who
  // reads: generation × 2 while a thread reads, + 1 while it answers a call; the standby
  // moves it to the next generation, and the answering thread goes back to reading only if
  // the turn is still its own. Without a timer or a standby, every call hands the reading to
  // another pooled thread at once instead.
  void StartStandby();
  void StandbyLoop();
  bool ArmHandOff(bool arm) const;
  // Runs `call` on the reading thread: true when this thread still reads afterwards, false
  // when the standby took the reading over; nothing (and `call` untouched) without a standby.
  std::optional<bool> AnswerWithStandby(std::function<void()>& call);

  bool Write(const json& message);
  bool WriteLine(std::string line);  // one serialized message, without its newline
  Result<ElicitResponse> Elicit(Call& call, const std::string& message, const json& schema,
                                std::chrono::milliseconds timeout);

  ServerOptions options_;
  ToolSet tools_;

  mutable std::mutex state_mu_;
  std::string negotiated_;  // empty until initialize
  bool client_elicitation_ = false;
  bool initialized_ = false;

  std::mutex out_mu_;
  int out_fd_ = -1;
  std::atomic<bool> output_broken_{false};

  std::mutex calls_mu_;
  std::condition_variable calls_cv_;
  std::map<std::string, std::shared_ptr<Call>> calls_;       // key: id.dump()
  std::map<std::string, std::shared_ptr<Pending>> pending_;  // key: our request id
  std::atomic<long> next_request_id_{1};
  std::atomic<bool> shutting_down_{false};

  // The reading role: held by one pooled thread at a time, taken over by the standby through
  // reading_turn_ (or, without one, handed on through StartWorker).
  int in_fd_ = -1;
  LineReader line_reader_{kMaxLineBytes};
  std::vector<char> read_buffer_;
  std::function<void()> next_call_;         // a tools/call for the reading thread to answer
  int handoff_timer_fd_ = -1;               // timerfd, armed while the reader answers a call
  int standby_wake_fd_ = -1;                // eventfd: ends StandbyLoop at shutdown
  std::atomic<bool> standby_ready_{false};  // a standby runs or is queued
  std::atomic<bool> standby_stop_{false};
  std::atomic<uint64_t> reading_turn_{0};
  std::mutex reading_mu_;
  std::condition_variable reading_cv_;
  bool reading_done_ = false;    // guarded by reading_mu_
  bool reading_failed_ = false;  // guarded by reading_mu_; Run() reads it after the wait

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by pool_mu_
  std::vector<std::thread> threads_;         // guarded by pool_mu_
  size_t idle_ = 0;                          // guarded by pool_mu_
  bool pool_stopping_ = false;               // guarded by pool_mu_
};

}  // namespace tmcra::mcp
