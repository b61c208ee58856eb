// The 1F1B schedule (parallel/pipeline_schedule.h) with ranks as threads: fake forward/backward
// callbacks record each stage's order and check the activations and gradients they receive.
// The pipeline group is a fake whose send blocks until the peer's matching recv (the strictest
// reading of Communicator's contract), so an exchange ordered the wrong way deadlocks, which the
// fake turns into an error after a timeout instead of a hang.
#include "parallel/pipeline_schedule.h"

#include <catch2/catch.hpp>

#include <algorithm>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace mtnlg {
namespace {

// Messages between the threads: (from, to) -> queue of pending sends.
struct Mailbox {
  struct Message {
    std::vector<float> data;
    bool taken = false;
  };
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Message>>> queues;  // guarded
};

constexpr auto kDeadlock = std::chrono::seconds(10);

// Only send and recv: a rendezvous, as a blocking Communicator::send may be.
class RendezvousGroup final : public Communicator {
 public:
  RendezvousGroup(Mailbox& box, int rank, int size) : box_(box), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  void all_reduce(Tensor&, ReduceOp) override { unused(); }
  void reduce_scatter(Tensor&, const Tensor&, ReduceOp) override { unused(); }
  void all_gather(Tensor&, const Tensor&) override { unused(); }
  void broadcast(Tensor&, int) override { unused(); }
  void barrier() override { unused(); }
  // Sends posted first, then the receives, then the sends waited for: nothing blocks another.
  void batch_send_recv(std::vector<P2POp>& ops) override {
    std::vector<std::pair<std::shared_ptr<Mailbox::Message>, int>> posted;
    for (P2POp& op : ops)
      if (op.send) posted.emplace_back(post(op.tensor, op.peer), op.peer);
    for (P2POp& op : ops)
      if (!op.send) recv(op.tensor, op.peer);
    for (auto& [message, peer] : posted) wait_taken(message, peer);
  }
  int64_t bytes_sent() const override { return 0; }

  void send(const Tensor& t, int peer) override { wait_taken(post(t, peer), peer); }
  void recv(Tensor& t, int peer) override {
    std::unique_lock lock(box_.mutex);
    auto& queue = box_.queues[{peer, rank_}];
    if (!box_.changed.wait_for(lock, kDeadlock, [&] { return !queue.empty(); }))
      throw std::runtime_error("deadlock: stage " + std::to_string(rank_) + " recv from " +
                               std::to_string(peer) + " never sent");
    auto message = queue.front();
    queue.pop_front();
    if (static_cast<size_t>(t.numel()) != message->data.size())
      throw std::runtime_error("recv of " + std::to_string(t.numel()) + " floats, sent " +
                               std::to_string(message->data.size()));
    std::copy(message->data.begin(), message->data.end(), t.data_as<float>());
    message->taken = true;
    box_.changed.notify_all();
  }

 private:
  [[noreturn]] static void unused() { throw std::logic_error("not used by the schedule"); }
  std::shared_ptr<Mailbox::Message> post(const Tensor& t, int peer) {
    auto message = std::make_shared<Mailbox::Message>();
    message->data.assign(t.data_as<float>(), t.data_as<float>() + t.numel());
    std::lock_guard lock(box_.mutex);
    box_.queues[{rank_, peer}].push_back(message);
    box_.changed.notify_all();
    return message;
  }
  void wait_taken(const std::shared_ptr<Mailbox::Message>& message, int peer) {
    std::unique_lock lock(box_.mutex);
    if (!box_.changed.wait_for(lock, kDeadlock, [&] { return message->taken; }))
      throw std::runtime_error("deadlock: stage " + std::to_string(rank_) + " send to " +
                               std::to_string(peer) + " never received");
  }
  Mailbox& box_;
  int rank_, size_;
  std::string name_ = "pipeline";
};

Tensor filled(float value) {
  Tensor t = Tensor::cpu({3}, DType::kF32);
  for (int64_t i = 0; i < 3; ++i) t.data_as<float>()[i] = value;
  return t;
}

// What stage `stage` sends for micro-batch `micro`: forward 10*micro + stage, backward 1000 + that.
float activation(int64_t micro, int stage) {
  return static_cast<float>(10 * micro + stage);
}
float gradient(int64_t micro, int stage) {
  return 1000.0f + activation(micro, stage);
}

struct StageLog {
  std::vector<std::string> order;  // "F3", "B0"; "F3?" when the received tensor was wrong
  int64_t max_in_flight = 0;
  std::vector<int64_t> chunk_now, chunk_max;  // interleaved: per chunk
};

// "F3", "B0", with '?' when the received tensor was wrong (built stepwise: GCC 12 warns falsely
// on a chain of std::string operator+).
std::string event(char kind, int64_t micro, bool good) {
  std::string e(1, kind);
  e += std::to_string(micro);
  if (!good) e += '?';
  return e;
}

// Runs the schedule on `p` threads with m micro-batches; returns each stage's log.
std::vector<StageLog> run_pipeline(int p, int64_t m) {
  Mailbox box;
  std::vector<StageLog> logs(p);
  std::vector<std::exception_ptr> errors(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      try {
        RendezvousGroup group(box, r, p);
        P2PCommunicator p2p(p > 1 ? &group : nullptr);
        auto be = make_cpu_backend(1);
        StageLog& log = logs[r];
        Tensor out, in_grad;
        int64_t in_flight = 0;
        const auto ok = [](const Tensor& t, float want) { return t.data_as<float>()[2] == want; };
        const ForwardStep forward = [&](int64_t micro, const Tensor& input) {
          const bool good = r == 0 ? !input.defined() : ok(input, activation(micro, r - 1));
          log.order.push_back(event('F', micro, good));
          log.max_in_flight = std::max(log.max_in_flight, ++in_flight);
          out = filled(activation(micro, r));
          return out;
        };
        const BackwardStep backward = [&](int64_t micro, const Tensor& output_grad) {
          const bool good =
              r == p - 1 ? !output_grad.defined() : ok(output_grad, gradient(micro, r + 1));
          log.order.push_back(event('B', micro, good));
          --in_flight;
          in_grad = filled(gradient(micro, r));
          return in_grad;
        };
        PipelineBuffers buffers = make_pipeline_buffers(*be, p2p, {3}, DType::kF32);
        forward_backward_pipelining_without_interleaving(p2p, m, buffers, forward, backward);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return logs;
}

// "F1.3": chunk 1, micro-batch 3 (built stepwise, as event()).
std::string chunk_event(char kind, int64_t chunk, int64_t micro, bool good) {
  std::string e(1, kind);
  e += std::to_string(chunk);
  e += '.';
  e += std::to_string(micro);
  if (!good) e += '?';
  return e;
}

// The interleaved schedule on `p` threads, v chunks, m micro-batches: chunk c of stage r is
// virtual stage c*p + r; each forward must get the previous virtual stage's output of the same
// micro-batch, each backward the next one's gradient. Events are "F<c>.<micro>" / "B<c>.<micro>".
std::vector<StageLog> run_interleaved(int p, int64_t v, int64_t m) {
  Mailbox box;
  std::vector<StageLog> logs(p);
  std::vector<std::exception_ptr> errors(p);
  std::vector<std::thread> threads;
  const int64_t stages = p * v;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      try {
        RendezvousGroup group(box, r, p);
        P2PCommunicator p2p(&group);
        auto be = make_cpu_backend(1);
        StageLog& log = logs[r];
        Tensor out, in_grad;
        int64_t in_flight = 0;
        const auto ok = [](const Tensor& t, float want) {
          return t.defined() && t.data_as<float>()[2] == want;
        };
        const ChunkForwardStep forward = [&](int64_t c, int64_t micro, const Tensor& input) {
          const int64_t vs = c * p + r;
          const bool good = vs == 0 ? !input.defined() : ok(input, activation(micro, int(vs - 1)));
          log.order.push_back(chunk_event('F', c, micro, good));
          log.max_in_flight = std::max(log.max_in_flight, ++in_flight);
          log.chunk_now.resize(static_cast<size_t>(v));
          log.chunk_max.resize(static_cast<size_t>(v));
          auto& now = log.chunk_now[static_cast<size_t>(c)];
          log.chunk_max[static_cast<size_t>(c)] =
              std::max(log.chunk_max[static_cast<size_t>(c)], ++now);
          out = filled(activation(micro, int(vs)));
          return out;
        };
        const ChunkBackwardStep backward = [&](int64_t c, int64_t micro, const Tensor& grad) {
          const int64_t vs = c * p + r;
          const bool good =
              vs == stages - 1 ? !grad.defined() : ok(grad, gradient(micro, int(vs + 1)));
          log.order.push_back(chunk_event('B', c, micro, good));
          --in_flight;
          --log.chunk_now[static_cast<size_t>(c)];
          in_grad = filled(gradient(micro, int(vs)));
          return in_grad;
        };
        PipelineBuffers buffers;
        buffers.input = be->alloc({3}, DType::kF32);
        buffers.output_grad = be->alloc({3}, DType::kF32);
        forward_backward_pipelining_with_interleaving(p2p, v, m, buffers, forward, backward);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return logs;
}

using Order = std::vector<std::string>;

TEST_CASE("1F1B order of Megatron-LM with 4 stages and 6 micro-batches") {
  const auto logs = run_pipeline(4, 6);
  // Stage r: min(3 - r, 6) warmup forwards, then forward/backward pairs, then the cooldown.
  CHECK(logs[0].order ==
        Order{"F0", "F1", "F2", "F3", "B0", "F4", "B1", "F5", "B2", "B3", "B4", "B5"});
  CHECK(logs[1].order ==
        Order{"F0", "F1", "F2", "B0", "F3", "B1", "F4", "B2", "F5", "B3", "B4", "B5"});
  CHECK(logs[2].order ==
        Order{"F0", "F1", "B0", "F2", "B1", "F3", "B2", "F4", "B3", "F5", "B4", "B5"});
  CHECK(logs[3].order ==
        Order{"F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3", "F4", "B4", "F5", "B5"});
  for (int r = 0; r < 4; ++r) {
    INFO("stage " << r);
    CHECK(logs[r].max_in_flight == 4 - r);
    CHECK(logs[r].max_in_flight == max_in_flight(4, r, 6));
  }
}

TEST_CASE("1F1B with fewer micro-batches than stages is all warmup and cooldown") {
  const auto logs = run_pipeline(4, 2);
  CHECK(logs[0].order == Order{"F0", "F1", "B0", "B1"});
  CHECK(logs[1].order == Order{"F0", "F1", "B0", "B1"});
  CHECK(logs[2].order == Order{"F0", "F1", "B0", "B1"});
  CHECK(logs[3].order == Order{"F0", "B0", "F1", "B1"});
  for (int r = 0; r < 4; ++r) {
    INFO("stage " << r);
    CHECK(logs[r].max_in_flight == max_in_flight(4, r, 2));
  }
}

TEST_CASE("1F1B with 2 and 3 stages and one stage") {
  for (int p : {1, 2, 3}) {
    for (int64_t m : {1, 2, 5}) {
      INFO(p << " stages, " << m << " micro-batches");
      const auto logs = run_pipeline(p, m);
      Order last;  // the last stage alternates from the start
      for (int64_t i = 0; i < m; ++i) {
        last.push_back(event('F', i, true));
        last.push_back(event('B', i, true));
      }
      CHECK(logs[p - 1].order == last);
      for (int r = 0; r < p; ++r) {
        INFO("stage " << r);
        CHECK(logs[r].order.size() == static_cast<size_t>(2 * m));
        for (const auto& event : logs[r].order) CHECK(event.back() != '?');
        CHECK(logs[r].max_in_flight == max_in_flight(p, r, m));
      }
    }
  }
}

TEST_CASE("interleaved 1F1B: every step gets the right tensor on 2-4 stages - 2 and 3 chunks") {
  for (int p : {2, 3, 4}) {
    for (int64_t v : {2, 3}) {
      for (int64_t groups : {1, 2, 3}) {
        const int64_t m = groups * p;
        INFO(p << " stages, " << v << " chunks, " << m << " micro-batches");
        const auto logs = run_interleaved(p, v, m);
        for (int r = 0; r < p; ++r) {
          INFO("stage " << r);
          const Order& order = logs[r].order;
          CHECK(order.size() == static_cast<size_t>(2 * m * v));
          for (const auto& e : order) CHECK(e.back() != '?');
          // Every (chunk, micro-batch) once each way, and a backward after its forward.
          for (int64_t c = 0; c < v; ++c)
            for (int64_t micro = 0; micro < m; ++micro) {
              const std::string f = chunk_event('F', c, micro, true);
              const std::string b = chunk_event('B', c, micro, true);
              const auto fi = std::find(order.begin(), order.end(), f);
              const auto bi = std::find(order.begin(), order.end(), b);
              CHECK(std::count(order.begin(), order.end(), f) == 1);
              CHECK(std::count(order.begin(), order.end(), b) == 1);
              CHECK(fi < bi);
            }
          CHECK(logs[r].max_in_flight == max_in_flight_interleaved(p, r, v, m));
          CHECK(logs[r].chunk_max == max_in_flight_per_chunk(p, r, v, m));
        }
      }
    }
  }
}

TEST_CASE("interleaved 1F1B order of Megatron-LM: 2 stages - 2 chunks - 4 micro-batches") {
  const auto logs = run_interleaved(2, 2, 4);
  // Stage 0: warm-up (2 - 0 - 1) * 2 + (2 - 1) * 2 = 4 forwards in groups of p = 2 micro-batches
  // per chunk, then forward/backward pairs, backwards from the last chunk down.
  CHECK(logs[0].order == Order{"F0.0", "F0.1", "F1.0", "F1.1", "F0.2", "B1.0", "F0.3", "B1.1",
                               "F1.2", "B0.0", "F1.3", "B0.1", "B1.2", "B1.3", "B0.2", "B0.3"});
  CHECK(logs[1].order == Order{"F0.0", "F0.1", "F1.0", "B1.0", "F1.1", "B1.1", "F0.2", "B0.0",
                               "F0.3", "B0.1", "F1.2", "B1.2", "F1.3", "B1.3", "B0.2", "B0.3"});
  CHECK(logs[0].max_in_flight == 5);
  CHECK(logs[1].max_in_flight == 3);
}

}  // namespace
}  // namespace mtnlg
