#include "parallel/tcp_communicator.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <random>
#include <thread>

#include "core/status.h"
#include "parallel/group_checks.h"
#include "parallel/link_communicator.h"
#include "parallel/peer_watch.h"

namespace mtnlg {

namespace {

using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

constexpr auto kSpin = std::chrono::microseconds(50);  // retries before sleeping in poll()

// A socket closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

[[noreturn]] void fail_setup(const std::string& what, const std::string& group) {
  throw io_error("creating TCP group '" + group + "': " + what + ": " + std::strerror(errno),
                 "tcp");
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// The IPv4 address to listen on: the interface's, else the host name's, else this host's.
std::string listen_address(const TcpOptions& o, const std::string& group) {
  if (!o.iface.empty()) {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) fail_setup("getifaddrs", group);
    std::string found;
    for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || o.iface != a->ifa_name)
        continue;
      char buf[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf,
                  sizeof(buf));
      found = buf;
      break;
    }
    ::freeifaddrs(list);
    if (found.empty())
      throw invalid_argument("network interface '" + o.iface + "' has no IPv4 address",
                             "MTNLG_GLOO_IFACE");
    return found;
  }
  std::string host = o.hostname;
  if (host.empty()) {
    char buf[256] = {};
    ::gethostname(buf, sizeof(buf) - 1);
    host = buf;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr)
    throw io_error("cannot resolve host name '" + host + "' for TCP group '" + group +
                       "'; the fix: MTNLG_GLOO_IFACE (an interface) or MTNLG_GLOO_HOSTNAME",
                   "tcp");
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof(buf));
  ::freeaddrinfo(res);
  return buf;
}

class TcpCommunicator final : public LinkCommunicator {
 public:
  TcpCommunicator(Store& store, std::string name, int rank, std::vector<int64_t> global_ranks,
                  const TcpOptions& options);
  ~TcpCommunicator() override {
    if (size_ == 1 || !failure_.empty() || std::uncaught_exceptions() > 0) return;
    try {
      barrier();
    } catch (const std::exception&) {
      // Leaving anyway; peers that still need us report their own error.
    }
  }
  TcpCommunicator(const TcpCommunicator&) = delete;
  TcpCommunicator& operator=(const TcpCommunicator&) = delete;

  const char* transport() const override { return "tcp"; }

 private:
  // The link of parallel/link_communicator.h: one poll() loop runs an exchange's transfers;
  // a timeout or a closed connection throws (and marks the communicator failed) naming the peer.
  void begin(Op op, const Tensor* data, const char* dir, int other) override;
  void exchange(std::vector<Transfer>& xs) override;

  ms timeout_;
  std::vector<Fd> peers_;  // [size_]: the socket to each other rank
  const char* op_ = "";    // op_name() of the operation begin() started
  const Tensor* data_ = nullptr;
  std::string failure_;
};

TcpCommunicator::TcpCommunicator(Store& store, std::string name, int rank,
                                 std::vector<int64_t> global_ranks, const TcpOptions& options)
    : LinkCommunicator(std::move(name), rank, std::move(global_ranks), ", TCP"),
      timeout_(options.timeout),
      peers_(static_cast<size_t>(size_)) {
  if (size_ == 1) return;
  const std::string group =
      name_ + "." + std::to_string(global_ranks_[0]) + "x" + std::to_string(size_);
  const int64_t generation = store.next_use("tcp/" + group + "/" + std::to_string(rank_));
  const std::string prefix = "tcp/" + group + "." + std::to_string(generation);

  // Listen, publish "address:port nonce" (rank 0's nonce is the group's).
  Fd listener(::socket(AF_INET, SOCK_STREAM, 0));
  if (listener.get() < 0) fail_setup("socket", name_);
  int one = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  const std::string ip = listen_address(options, name_);
  ::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  addr.sin_port = 0;
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    fail_setup("bind to " + ip, name_);
  if (::listen(listener.get(), size_) != 0) fail_setup("listen", name_);
  socklen_t len = sizeof(addr);
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string me = ip + ":" + std::to_string(ntohs(addr.sin_port));
  store.set(prefix + "/" + owned_key("addr", global_ranks_[rank_]),
            std::vector<uint8_t>(me.begin(), me.end()));
  uint64_t nonce = 0;
  if (rank_ == 0) {
    std::random_device rd;
    nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    std::vector<uint8_t> v(8);
    std::memcpy(v.data(), &nonce, 8);
    store.set(prefix + "/" + owned_key("nonce", global_ranks_[0]), v);
  } else {
    const auto v = store.get(prefix + "/" + owned_key("nonce", global_ranks_[0]), timeout_);
    MTNLG_CHECK_EQ(v.size(), 8u);
    std::memcpy(&nonce, v.data(), 8);
  }
  const auto deadline = Clock::now() + timeout_;
  auto left_ms = [&] {
    return static_cast<int>(
        std::max<int64_t>(0, std::chrono::duration_cast<ms>(deadline - Clock::now()).count()));
  };
  // A member that stopped meanwhile is named at once rather than at the timeout.
  PeerWatch watch(store, global_ranks_, rank_);
  auto stop_if_gone = [&] {
    if (const auto gone = watch.check())
      throw io_error("creating TCP " + where() + ": " + *gone + ": this rank stops too", "tcp");
  };
  // Connect to every lower rank: hello = our rank, the nonce.
  for (int p = 0; p < rank_; ++p) {
    const auto v = store.get(prefix + "/" + owned_key("addr", global_ranks_[p]), timeout_);
    const std::string where_to(v.begin(), v.end());
    const size_t colon = where_to.rfind(':');
    sockaddr_in peer{};
    peer.sin_family = AF_INET;
    peer.sin_port = htons(static_cast<uint16_t>(std::stoi(where_to.substr(colon + 1))));
    ::inet_pton(AF_INET, where_to.substr(0, colon).c_str(), &peer.sin_addr);
    for (;;) {
      Fd s(::socket(AF_INET, SOCK_STREAM, 0));
      if (::connect(s.get(), reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) == 0) {
        int32_t hello[3] = {rank_, 0, 0};
        std::memcpy(&hello[1], &nonce, 8);
        if (::send(s.get(), hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello))
          fail_setup("sending the hello to rank " + std::to_string(p), name_);
        set_nodelay(s.get());
        set_nonblocking(s.get());
        peers_[static_cast<size_t>(p)] = std::move(s);
        break;
      }
      if (left_ms() == 0)
        throw io_error("creating TCP " + where() + ": cannot connect to " + peer_str(p) + " at " +
                           where_to + ": " + std::strerror(errno),
                       "tcp");
      stop_if_gone();  // looks once a second at most
      std::this_thread::sleep_for(ms(10));
    }
  }
  // Accept every higher rank.
  for (int accepted = 0; accepted < size_ - 1 - rank_;) {
    pollfd pfd{listener.get(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, std::min(left_ms(), 1000));
    if (ready <= 0 && left_ms() == 0)
      throw io_error("creating TCP " + where() + ": " +
                         std::to_string(size_ - 1 - rank_ - accepted) +
                         " higher rank(s) did not connect within the timeout",
                     "tcp");
    if (ready <= 0) {
      stop_if_gone();
      continue;
    }
    Fd s(::accept(listener.get(), nullptr, nullptr));
    if (s.get() < 0) continue;
    int32_t hello[3] = {-1, 0, 0};
    pollfd h{s.get(), POLLIN, 0};
    if (::poll(&h, 1, left_ms()) <= 0 ||
        ::recv(s.get(), hello, sizeof(hello), MSG_WAITALL) != sizeof(hello))
      continue;
    uint64_t theirs = 0;
    std::memcpy(&theirs, &hello[1], 8);
    const int p = hello[0];
    if (theirs != nonce || p <= rank_ || p >= size_ || peers_[static_cast<size_t>(p)].get() >= 0)
      continue;  // not one of ours: refused
    set_nodelay(s.get());
    set_nonblocking(s.get());
    peers_[static_cast<size_t>(p)] = std::move(s);
    ++accepted;
  }
}

void TcpCommunicator::begin(Op op, const Tensor* data, const char*, int) {
  if (!failure_.empty())
    throw io_error(std::string(op_name(op)) + " on " + where() +
                       ": the communicator failed earlier and cannot be used: " + failure_,
                   "tcp");
  op_ = op_name(op);
  data_ = data;
}

void TcpCommunicator::exchange(std::vector<Transfer>& xs) {
  const auto start = Clock::now();
  std::vector<pollfd> fds;
  std::vector<size_t> which;
  std::vector<uint8_t> busy;
  for (;;) {
    fds.clear();
    which.clear();
    // One byte stream per peer and direction: a transfer waits for the earlier ones on it.
    busy.assign(2 * static_cast<size_t>(size_), 0);
    for (size_t i = 0; i < xs.size(); ++i) {
      Transfer& x = xs[i];  // data and bytes advance as they move
      uint8_t& stream = busy[2 * static_cast<size_t>(x.peer) + (x.send ? 1 : 0)];
      if (stream) continue;
      // Try first: most small transfers complete without waiting.
      while (x.bytes > 0) {
        const int fd = peers_[static_cast<size_t>(x.peer)].get();
        const ssize_t n =
            x.send ? ::send(fd, x.data, x.bytes, MSG_NOSIGNAL) : ::recv(fd, x.data, x.bytes, 0);
        if (n > 0) {
          x.data += n;
          x.bytes -= static_cast<size_t>(n);
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
        const auto waited = std::chrono::duration_cast<ms>(Clock::now() - start).count();
        failure_ = std::string(op_) + " of " + (data_ ? data_->str() : "no data") + " on " +
                   where() + " failed after " + std::to_string(waited) +
                   " ms: " + peer_str(x.peer) +
                   " closed its connection (the process died or failed)" +
                   (n < 0 ? std::string(" [") + std::strerror(errno) + "]" : "");
        throw io_error(failure_, "tcp");
      }
      if (x.bytes > 0) {
        stream = 1;
        fds.push_back({peers_[static_cast<size_t>(x.peer)].get(),
                       static_cast<short>(x.send ? POLLOUT : POLLIN), 0});
        which.push_back(i);
      }
    }
    if (fds.empty()) return;
    const auto waited = Clock::now() - start;
    // Retry without sleeping for a few tens of microseconds: a small message's answer usually
    // arrives within that, and a thread woken from poll() pays the scheduler's latency again
    // (Open MPI's TCP transport polls the same way).
    if (waited < kSpin) {
      std::this_thread::yield();
      continue;
    }
    if (waited >= timeout_) {
      failure_ = std::string(op_) + " of " + (data_ ? data_->str() : "no data") + " on " + where() +
                 " failed after " + std::to_string(std::chrono::duration_cast<ms>(waited).count()) +
                 " ms (timeout " + std::to_string(timeout_.count()) +
                 " ms): " + peer_str(xs[which.front()].peer) + " did not answer in time";
      throw io_error(failure_, "tcp");
    }
    const auto left = std::chrono::duration_cast<ms>(timeout_ - waited).count();
    ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left, 100)) + 1);
  }
}

}  // namespace

std::unique_ptr<Communicator> make_tcp_communicator(Store& store, const std::string& group_name,
                                                    int rank_in_group,
                                                    std::vector<int64_t> global_ranks,
                                                    const TcpOptions& options) {
  return std::make_unique<TcpCommunicator>(store, group_name, rank_in_group,
                                           std::move(global_ranks), options);
}

}  // namespace mtnlg
