// RunScheduledEncodes: the model side of a step's media, run by the engine between planning
// (Scheduler::Schedule, which only decides what to encode) and the forward. Each planned
// segment goes through ModelRunner::Encode once; its output fills the EncoderCache and the
// features of every sequence of the step that waits for it. An encode that fails (the runner
// throws an Error, or returns the wrong number of feature rows) fails just the sequences that
// need it: they leave the step and wait in step.failed for the engine to finish them.
#pragma once

#include "engine/runtime/encoder_cache.h"
#include "engine/runtime/scheduler.h"
#include "engine/step/model_runner.h"

namespace m3::engine {

// Runs step.encodes in order. Call before Scheduler::BuildBatch.
void RunScheduledEncodes(ScheduledStep& step, ModelRunner& runner, EncoderCache& cache);

}  // namespace m3::engine
