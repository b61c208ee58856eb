#include "parallel/store.h"

#include <algorithm>
#include <cctype>

#include "core/status.h"

namespace mtnlg {

namespace {

using Clock = std::chrono::steady_clock;

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

Error timed_out(const std::vector<std::string>& missing, std::chrono::milliseconds timeout) {
  return io_error("rendezvous timed out after " + std::to_string(timeout.count()) +
                      " ms waiting for key(s) " + join_keys(missing) +
                      ": a rank did not start, died, or is in another group; raise "
                      "parallel.timeout_s if startup is slow",
                  "store");
}

}  // namespace

void Store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (const auto& key : keys) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    get(key, std::max(left, std::chrono::milliseconds(0)));
  }
}

void Store::publish_failure(int64_t rank, const std::string& detail) noexcept {
  try {
    set(owned_key(kFailedKey, rank), std::vector<uint8_t>(detail.begin(), detail.end()));
  } catch (...) {  // best effort: the others still time out, naming the key
  }
}

std::optional<std::string> Store::failure_of(int64_t rank) {
  const auto value = try_get(owned_key(kFailedKey, rank));
  if (!value) return std::nullopt;
  return std::string(value->begin(), value->end());
}

int64_t Store::next_use(const std::string& name) {
  std::lock_guard<std::mutex> lock(uses_mutex_);
  return uses_[name]++;
}

std::string owned_key(const std::string& name, int64_t setter_rank) {
  return name + "@" + std::to_string(setter_rank);
}

int64_t key_owner(const std::string& key) {
  const auto at = key.rfind('@');
  if (at == std::string::npos || at + 1 == key.size()) return 0;
  for (size_t i = at + 1; i < key.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(key[i]))) return 0;
  return std::stoll(key.substr(at + 1));
}

void PrefixStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  base_.set(prefix_ + key, value);
}

std::vector<uint8_t> PrefixStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return base_.get(prefix_ + key, timeout);
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(prefix_ + k);
  base_.wait(full, timeout);
}

std::optional<std::vector<uint8_t>> PrefixStore::try_get(const std::string& key) {
  return base_.try_get(prefix_ + key);
}

void PrefixStore::publish_failure(int64_t rank, const std::string& detail) noexcept {
  base_.publish_failure(rank, detail);
}

std::optional<std::string> PrefixStore::failure_of(int64_t rank) {
  return base_.failure_of(rank);
}

void MemoryStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

std::vector<uint8_t> MemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) != 0; }))
    throw timed_out({key}, timeout);
  return values_.at(key);
}

std::optional<std::vector<uint8_t>> MemoryStore::try_get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

void MemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto all_present = [&] {
    return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return values_.count(k); });
  };
  if (!changed_.wait_for(lock, timeout, all_present)) {
    std::vector<std::string> missing;
    for (const auto& k : keys)
      if (!values_.count(k)) missing.push_back(k);
    throw timed_out(missing, timeout);
  }
}

}  // namespace mtnlg
