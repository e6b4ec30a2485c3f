// RenderBudget and the checks against the active one (see render_budget.h).
#include "gateway/template/render_budget.h"

#include <pthread.h>

#include <string>

#include "gateway/template/render_error.h"

namespace m3::tmpl {

namespace {

thread_local RenderBudget* g_active = nullptr;

std::string Mib(int64_t bytes) {
  if (bytes % (int64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// The lowest usable address of this thread's stack, found once per thread.
uintptr_t StackLow() {
  thread_local uintptr_t low = [] {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return uintptr_t{0};
    void* addr = nullptr;
    size_t size = 0;
    uintptr_t result = 0;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) result = reinterpret_cast<uintptr_t>(addr);
    pthread_attr_destroy(&attr);
    return result;
  }();
  return low;
}

}  // namespace

RenderBudget::RenderBudget(const TemplateLimits& limits) : limits_(limits), previous_(g_active) {
  g_active = this;
}

RenderBudget::~RenderBudget() {
  g_active = previous_;
}

RenderBudget* RenderBudget::Active() {
  return g_active;
}

void RenderBudget::Steps(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) {
    FailLimit("template exceeds its work budget of " + std::to_string(limits_.max_steps) +
              " steps");
  }
}

void RenderBudget::LoopIteration() {
  if (++loop_iterations_ > limits_.max_loop_iterations) {
    FailLimit("template runs more than " + std::to_string(limits_.max_loop_iterations) +
              " loop iterations");
  }
  Steps(1);
}

const TemplateLimits& ActiveLimits() {
  static const TemplateLimits kDefaults;
  return g_active ? g_active->limits() : kDefaults;
}

void ChargeSteps(int64_t n) {
  if (g_active) g_active->Steps(n);
}

void CheckStringSize(uint64_t bytes) {
  const int64_t max = ActiveLimits().max_string_bytes;
  if (bytes > static_cast<uint64_t>(max)) {
    FailLimit("template string of " + std::to_string(bytes) + " bytes exceeds the limit of " +
              Mib(max));
  }
}

void ChargeString(uint64_t bytes) {
  CheckStringSize(bytes);
  ChargeSteps(static_cast<int64_t>(bytes / 64));
}

void CheckListSize(uint64_t items) {
  const int64_t max = ActiveLimits().max_list_items;
  if (items > static_cast<uint64_t>(max)) {
    FailLimit("template list of " + std::to_string(items) + " items exceeds the limit of " +
              std::to_string(max));
  }
}

void CheckValueNesting(int depth) {
  const int max = ActiveLimits().max_nesting;
  if (depth > max) FailLimit("template value nested deeper than " + std::to_string(max));
}

bool StackNearlyExhausted(uint64_t reserve) {
  const uintptr_t low = StackLow();
  if (low == 0) return false;
  // The frame address, not a local's: sanitizers may move locals to a heap-allocated stack.
  const auto sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  return sp < low + reserve;
}

}  // namespace m3::tmpl
