// The counter-based random stream of one request: the uniform number used to sample its n-th
// generated token is a pure function of (seed, n). Nothing else (batch-mates, preemption,
// backend, thread) can change which token a seeded request draws. Defined once for host and
// device code in kernels/random_stream.h.
#pragma once

#include "kernels/random_stream.h"

namespace m3::engine {

using kernels::CounterUniform;

}  // namespace m3::engine
