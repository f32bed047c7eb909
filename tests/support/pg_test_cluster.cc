#include "tests/support/pg_test_cluster.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <random>

namespace tmcra::testing {

namespace {

std::string AdminExec(const PgCluster& cluster, const std::string& sql) {
  auto conn = pg::Connection::Open(cluster.Options("postgres"));
  if (!conn) return conn.error().ToString();
  auto done = (*conn)->Run(sql);
  return done ? std::string() : done.error().ToString();
}

}  // namespace

PgCluster PgCluster::FromEnv() {
  const char* dir = std::getenv("TMCRA_PG_DIR");
  INFO("TMCRA_PG_DIR names the cluster tests/support/pg_cluster.sh started (CTest's fixture)");
  REQUIRE(dir != nullptr);
  PgCluster c;
  c.dir = dir;
  std::ifstream in(c.dir + "/env");
  REQUIRE(in.good());
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq);
    const std::string value = line.substr(eq + 1);
    if (key == "TMCRA_PG_PORT") c.port = std::stoi(value);
    if (key == "TMCRA_PG_SOCKET") c.socket_dir = value;
    if (key == "TMCRA_PG_USER") c.user = value;
    if (key == "TMCRA_PG_PASSWORD_FILE") c.password_file = value;
    if (key == "TMCRA_PG_BIN") c.bin = value;
  }
  REQUIRE(c.port > 0);
  return c;
}

std::string PgCluster::Conninfo(std::string_view dbname) const {
  return "host=127.0.0.1 port=" + std::to_string(port) + " user=" + user +
         " dbname=" + std::string(dbname);
}

std::string PgCluster::Password() const {
  std::ifstream in(password_file);
  std::string password;
  std::getline(in, password);
  return password;
}

pg::ConnectOptions PgCluster::Options(std::string_view dbname) const {
  pg::ConnectOptions options;
  options.conninfo = Conninfo(dbname);
  options.password = Password();
  options.application_name = "tmcra-test";
  return options;
}

ScratchDatabase::ScratchDatabase(std::string_view label) : cluster_(PgCluster::FromEnv()) {
  std::random_device rd;
  name_ = "t_" + std::string(label) + "_" + std::to_string(getpid()) + "_" +
          std::to_string(rd() % 1000000);
  const std::string error = AdminExec(cluster_, "CREATE DATABASE " + name_);
  INFO(error);
  REQUIRE(error.empty());
}

ScratchDatabase::~ScratchDatabase() {
  (void)AdminExec(cluster_, "DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
}

}  // namespace tmcra::testing
