// The running render's account against its TemplateLimits. The evaluator installs one budget
// per Render on its thread; value construction, the operators, filters and methods charge it
// through the free functions below without an evaluator at hand. With no render running (a
// value built outside Render) the size and nesting checks use the default limits and nothing
// is counted.
#pragma once

#include <cstdint>

#include "gateway/template/template_limits.h"

namespace m3::tmpl {

class RenderBudget {
 public:
  explicit RenderBudget(const TemplateLimits& limits);
  ~RenderBudget();
  RenderBudget(const RenderBudget&) = delete;
  RenderBudget& operator=(const RenderBudget&) = delete;

  static RenderBudget* Active();  // the budget of the render running on this thread, or null

  const TemplateLimits& limits() const { return limits_; }
  void Steps(int64_t n);
  void LoopIteration();
  int64_t steps() const { return steps_; }
  int64_t loop_iterations() const { return loop_iterations_; }

 private:
  TemplateLimits limits_;
  int64_t steps_ = 0;
  int64_t loop_iterations_ = 0;
  RenderBudget* previous_;
};

const TemplateLimits& ActiveLimits();

// Each throws RenderError naming the limit when it is exceeded.
void ChargeSteps(int64_t n);
void CheckStringSize(uint64_t bytes);  // a string about to be built
void ChargeString(uint64_t bytes);     // CheckStringSize + one step per 64 bytes
void CheckListSize(uint64_t items);    // a list or dict about to be built
void CheckValueNesting(int depth);     // a list/dict value's depth (1 = flat)

// True when less than `reserve` bytes of this thread's stack are left below the caller: the
// guard behind the nesting counts, for threads started with small stacks.
bool StackNearlyExhausted(uint64_t reserve = uint64_t{256} << 10);

}  // namespace m3::tmpl
