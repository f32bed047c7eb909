// tmcra-store-check DATA_DIR: what the memory store and the outbox of a data directory hold,
// as one JSON object, for crash tests written in other languages:
//   {"memory_integrity", "outbox_integrity", "records", "message_counts": {message_id: n},
//    "jobs", "jobs_not_succeeded", "outbox_items", "outbox_not_succeeded"}
// tmcra-store-check --records DATA_DIR: every record of the memory store, oldest first, as one
// JSON array of {scope_name, session_id, message_id, role, content}.
// tmcra-store-check --hold-write-lock DB_FILE: takes SQLite's write lock of DB_FILE (BEGIN
// IMMEDIATE), prints "held", and keeps it until its stdin ends; then rolls back. For tests that
// need a writer of the store to wait (a real lock held by a real process).
// tmcra-store-check --dead-letter OUTBOX_FILE: marks the oldest item of the outbox a dead letter
// (as a refused delivery leaves it) and prints its id: for tests of replaying one.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "base/sqlite_db.h"

using json = nlohmann::json;

namespace {

json Scalar(tmcra::db::Database& db, const std::string& sql) {
  auto st = db.Prepare(sql);
  if (!st) return st.error().message;
  auto row = st->Step();
  if (!row || !*row) return nullptr;
  if (st->IsNull(0)) return nullptr;
  return sql.rfind("PRAGMA", 0) == 0 ? json(st->Text(0)) : json(st->Int(0));
}

}  // namespace

int HoldWriteLock(const std::string& file) {
  auto db = tmcra::db::Database::Open({file});
  if (!db) {
    std::cerr << "cannot open " << file << ": " << db.error().message << "\n";
    return 1;
  }
  if (auto begun = (*db)->Exec("BEGIN IMMEDIATE"); !begun) {
    std::cerr << "cannot take the write lock: " << begun.error().message << "\n";
    return 1;
  }
  std::cout << "held" << std::endl;  // stdout-ok: a test tool
  for (std::string line; std::getline(std::cin, line);) {
  }
  (void)(*db)->Exec("ROLLBACK");
  return 0;
}

int Records(const std::string& dir) {
  auto memory = tmcra::db::Database::Open({dir + "/memory.db"});
  if (!memory) {
    std::cerr << "cannot open the memory store in " << dir << "\n";
    return 1;
  }
  json out = json::array();
  auto st = (*memory)->Prepare(
      "SELECT scope_name, session_id, message_id, role, content FROM records ORDER BY event_seq");
  if (!st) {
    std::cerr << st.error().message << "\n";
    return 1;
  }
  for (;;) {
    auto row = st->Step();
    if (!row || !*row) break;
    out.push_back({{"scope_name", st->Text(0)},
                   {"session_id", st->Text(1)},
                   {"message_id", st->Text(2)},
                   {"role", st->Text(3)},
                   {"content", st->Text(4)}});
  }
  std::cout << out.dump() << std::endl;  // stdout-ok: a test tool
  return 0;
}

int DeadLetter(const std::string& file) {
  auto db = tmcra::db::Database::Open({file});
  if (!db) {
    std::cerr << db.error().ToString() << "\n";
    return 1;
  }
  auto pick = (*db)->Prepare("SELECT item_id FROM ingest_queue ORDER BY created_at LIMIT 1");
  if (!pick || !pick->Step().value_or(false)) {
    std::cerr << "no outbox item\n";
    return 1;
  }
  const std::string id = pick->Text(0);
  pick->Reset();
  auto mark = (*db)->Prepare(
      "UPDATE ingest_queue SET state = 'dead_letter', last_error = 'refused (planted by a test)' "
      "WHERE item_id = ?");
  if (!mark || !mark->Bind(1, id).Run()) return 1;
  std::cout << id << "\n";
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--hold-write-lock") return HoldWriteLock(argv[2]);
  if (argc == 3 && std::string(argv[1]) == "--dead-letter") return DeadLetter(argv[2]);
  if (argc == 3 && std::string(argv[1]) == "--records") return Records(argv[2]);
  if (argc != 2) {
    std::cerr
        << "usage: tmcra-store-check DATA_DIR | --records DATA_DIR | --hold-write-lock DB_FILE | "
           "--dead-letter OUTBOX_FILE\n";
    return 2;
  }
  const std::string dir = argv[1];
  auto memory = tmcra::db::Database::Open({dir + "/memory.db"});
  auto outbox = tmcra::db::Database::Open({dir + "/outbox.sqlite3"});
  if (!memory || !outbox) {
    std::cerr << "cannot open the stores in " << dir << "\n";
    return 1;
  }
  json out;
  out["memory_integrity"] = Scalar(**memory, "PRAGMA integrity_check");
  out["outbox_integrity"] = Scalar(**outbox, "PRAGMA integrity_check");
  out["records"] = Scalar(**memory, "SELECT COUNT(*) FROM records");
  out["jobs"] = Scalar(**memory, "SELECT COUNT(*) FROM jobs");
  out["jobs_not_succeeded"] =
      Scalar(**memory, "SELECT COUNT(*) FROM jobs WHERE status <> 'succeeded'");
  out["outbox_items"] = Scalar(**outbox, "SELECT COUNT(*) FROM ingest_queue");
  out["outbox_not_succeeded"] =
      Scalar(**outbox, "SELECT COUNT(*) FROM ingest_queue WHERE state <> 'succeeded'");
  json errors = json::object();
  if (auto e =
          (*outbox)->Prepare("SELECT state, last_error, COUNT(*) FROM ingest_queue "
                             "WHERE state <> 'succeeded' GROUP BY state, last_error LIMIT 20")) {
    for (;;) {
      auto row = e->Step();
      if (!row || !*row) break;
      errors[e->Text(0) + ": " + e->Text(1)] = e->Int(2);
    }
  }
  out["outbox_errors"] = std::move(errors);
  json counts = json::object();
  auto st = (*memory)->Prepare("SELECT message_id, COUNT(*) FROM records GROUP BY message_id");
  if (st) {
    for (;;) {
      auto row = st->Step();
      if (!row || !*row) break;
      counts[st->Text(0)] = st->Int(1);
    }
  }
  out["message_counts"] = std::move(counts);
  std::cout << out.dump() << std::endl;  // stdout-ok: a test tool, not the MCP server
  return 0;
}
