// The tests' PostgreSQL: the private cluster tests/support/pg_cluster.sh started (CTest's
// fixture `postgres` sets TMCRA_PG_DIR to its directory), and a scratch database per test.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/pg_db.h"

namespace tmcra::testing {

struct PgCluster {
  std::string dir;
  int port = 0;
  std::string socket_dir;
  std::string user;
  std::string password_file;
  std::string bin;  // the server's bin directory (pg_ctl)

  // The cluster TMCRA_PG_DIR names; fails the test (REQUIRE) when there is none.
  static PgCluster FromEnv();
  // A conninfo over TCP on 127.0.0.1, without the password.
  std::string Conninfo(std::string_view dbname) const;
  std::string Password() const;
  // Options with the password from the cluster's password file.
  pg::ConnectOptions Options(std::string_view dbname) const;
};

// A database of its own for one test, created empty and dropped (with its connections) when
// the object goes.
class ScratchDatabase {
 public:
  explicit ScratchDatabase(std::string_view label);
  ~ScratchDatabase();
  ScratchDatabase(const ScratchDatabase&) = delete;
  ScratchDatabase& operator=(const ScratchDatabase&) = delete;

  const PgCluster& cluster() const { return cluster_; }
  const std::string& name() const { return name_; }
  std::string Conninfo() const { return cluster_.Conninfo(name_); }
  pg::ConnectOptions Options() const { return cluster_.Options(name_); }

 private:
  PgCluster cluster_;
  std::string name_;
};

}  // namespace tmcra::testing
