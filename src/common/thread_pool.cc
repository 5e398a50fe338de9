#include "common/thread_pool.h"

namespace npm {

ThreadPool::ThreadPool(unsigned threads) {
  if (threads < 1) threads = 1;
  for (unsigned i = 0; i < threads; ++i) {
    workers_.emplace_back([this] {
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
          if (queue_.empty()) return;
          job = std::move(queue_.front());
          queue_.pop_front();
        }
        job();
      }
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

}  // namespace npm
