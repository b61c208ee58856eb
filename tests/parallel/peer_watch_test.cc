#include "parallel/peer_watch.h"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "parallel/file_store.h"
#include "test_util.h"

namespace mtnlg {
namespace {

using std::chrono::milliseconds;
using test::TempDir;

// A child process that publishes its process key as global rank `rank` through a FileStore in
// `dir`, says so on a pipe, and sleeps until killed. Killed and reaped at the end if still there.
struct Child {
  Child(const std::string& dir, int64_t rank) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      FileStore store(dir);
      publish_process(store, rank);
      const char ok = 1;
      if (::write(fds[1], &ok, 1) != 1) std::_Exit(1);
      for (;;) ::pause();
    }
    ::close(fds[1]);
    char ok = 0;
    REQUIRE(::read(fds[0], &ok, 1) == 1);
    ::close(fds[0]);
  }
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      reap();
    }
  }
  void reap() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
  }
  pid_t pid = -1;
};

TEST_CASE("PeerWatch names a member whose process on this host was killed - zombie or reaped") {
  TempDir dir;
  FileStore store(dir.path().string());
  publish_process(store, 4);
  Child child(dir.path().string(), 9);
  const pid_t pid = child.pid;
  PeerWatch watch(store, {4, 9}, 0, milliseconds(0));
  CHECK_FALSE(watch.check());  // alive
  ::kill(pid, SIGKILL);
  // Killed, not yet reaped (a launcher reaps it a moment later): a zombie is gone too.
  std::optional<std::string> gone;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    gone = watch.check();
  }
  REQUIRE(gone);
  CHECK_THAT(*gone, Catch::Contains("peer rank 1 (global rank 9) is gone") &&
                        Catch::Contains("pid " + std::to_string(pid) + " on this host"));
  child.reap();
  PeerWatch after(store, {4, 9}, 0);
  const auto reaped = after.check();
  REQUIRE(reaped);
  CHECK_THAT(*reaped, Catch::Contains("(global rank 9) is gone"));
}

TEST_CASE("FileStore get of a key whose setter's process is gone stops at once naming it") {
  TempDir dir;
  FileStore store(dir.path().string());
  Child child(dir.path().string(), 3);
  ::kill(child.pid, SIGKILL);
  child.reap();
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(store.get(owned_key("addr", 3), milliseconds(60000)),
                      Catch::Contains("rendezvous: rank 3 is gone: its process (pid") &&
                          Catch::Contains("before it set key 'addr@3'"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
}

TEST_CASE("PeerWatch names a member that said it failed - before its process is looked at") {
  TempDir dir;
  FileStore store(dir.path().string());
  PeerWatch watch(store, {3, 5, 7}, 2);
  CHECK_FALSE(watch.check(true));
  store.publish_failure(5, "on host node7, pid 42");
  const auto gone = watch.check(true);
  REQUIRE(gone);
  CHECK(*gone ==
        "peer rank 1 (global rank 5) stopped with an error (on host node7, pid 42; its own output "
        "says why)");
}

TEST_CASE("PeerWatch ignores members it cannot see - another host or no process key") {
  MemoryStore store;
  // A pid that does not exist here, but on another host: not this watch's to judge.
  const std::string elsewhere = "node-elsewhere pid:[4026531836] 999999999";
  store.set(owned_key(kProcessKey, 1), std::vector<uint8_t>(elsewhere.begin(), elsewhere.end()));
  PeerWatch watch(store, {0, 1, 2}, 0, milliseconds(0));  // rank 2 wrote no process key
  for (int i = 0; i < 3; ++i) CHECK_FALSE(watch.check());
  CHECK(watch.looks() == 3);
}

TEST_CASE("PeerWatch looks at once then once an interval - restart looks at once again") {
  MemoryStore store;
  PeerWatch watch(store, {0, 1}, 1, std::chrono::hours(1));
  CHECK_FALSE(watch.check());
  CHECK(watch.looks() == 1);
  store.publish_failure(0, "on host a, pid 1");
  CHECK_FALSE(watch.check());  // within the interval: no look
  CHECK(watch.looks() == 1);
  watch.restart();  // a new wait
  const auto gone = watch.check();
  CHECK(watch.looks() == 2);
  REQUIRE(gone);
  CHECK_THAT(*gone, Catch::Contains("peer rank 0 (global rank 0) stopped with an error"));
  CHECK(watch.check(true));  // a transport's error looks whatever the interval
  CHECK(watch.looks() == 3);
}

// Reads of absent keys that take 150 ms each (a PMIx server holding the request).
class SlowStore final : public Store {
 public:
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    base_.set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key, milliseconds timeout) override {
    return base_.get(key, timeout);
  }
  std::optional<std::vector<uint8_t>> try_get(const std::string& key) override {
    ++reads;
    auto value = base_.try_get(key);
    if (!value) std::this_thread::sleep_for(milliseconds(150));
    return value;
  }
  int reads = 0;

 private:
  MemoryStore base_;
};

TEST_CASE("PeerWatch stops reading after its budget and goes on with the next member") {
  SlowStore store;
  store.publish_failure(5, "on host b, pid 2");
  PeerWatch watch(store, {0, 1, 2, 3, 4, 5}, 0, milliseconds(0));
  // Each member costs two slow reads (failure, process key): one member fills the 200 ms budget.
  CHECK_FALSE(watch.check());
  CHECK(store.reads == 2);
  std::optional<std::string> gone;
  int looks = 1;
  while (!gone && looks < 10) {
    gone = watch.check();
    ++looks;
  }
  REQUIRE(gone);
  CHECK(looks == 5);  // members 1, 2, 3, 4 and then 5, one a look
  CHECK_THAT(*gone, Catch::Contains("(global rank 5) stopped with an error (on host b, pid 2"));
}

TEST_CASE("OperationRoll names the members that did not say they reached a collective") {
  MemoryStore store;
  const std::vector<int64_t> members = {4, 5, 6, 7};
  OperationRoll r0(store, "nccl/g.0", members, 0), r2(store, "nccl/g.0", members, 2);
  r0.reached(3);
  r2.reached(3);
  r2.reached(4);  // a later collective: not the one asked about
  CHECK(r0.missing(3, milliseconds(1000)) ==
        "peer rank 1 (global rank 5), peer rank 3 (global rank 7)");
  OperationRoll r1(store, "nccl/g.0", members, 1), r3(store, "nccl/g.0", members, 3);
  r1.reached(3);
  r3.reached(3);
  CHECK(r0.missing(3, milliseconds(1000)).empty());
  // Another generation of the group keeps its own roll.
  OperationRoll again(store, "nccl/g.1", members, 0);
  CHECK_THAT(again.missing(3, milliseconds(1000)), Catch::Contains("peer rank 3 (global rank 7)"));
  // Saying it twice (a FileStore refuses a key set twice) does not throw.
  TempDir dir;
  FileStore files(dir.path().string());
  OperationRoll twice(files, "nccl/g.0", members, 0);
  twice.reached(1);
  twice.reached(1);
}

TEST_CASE("OperationRoll names 8 members then counts - and counts those its budget left unread") {
  MemoryStore store;
  std::vector<int64_t> members(12);
  for (size_t i = 0; i < members.size(); ++i) members[i] = static_cast<int64_t>(i);
  OperationRoll roll(store, "nccl/big.0", members, 0);
  const std::string many = roll.missing(0, milliseconds(10000));
  CHECK_THAT(many, Catch::StartsWith("peer rank 1 (global rank 1), peer rank 2 (global rank 2)") &&
                       Catch::Contains("peer rank 8 (global rank 8) and 3 more"));
  SlowStore slow;  // 150 ms a read of an absent key
  OperationRoll budgeted(slow, "nccl/g.0", {0, 1, 2, 3}, 0);
  CHECK(budgeted.missing(0, milliseconds(200)) ==
        "peer rank 1 (global rank 1), peer rank 2 (global rank 2); 1 member(s) not read in time");
}

}  // namespace
}  // namespace mtnlg
