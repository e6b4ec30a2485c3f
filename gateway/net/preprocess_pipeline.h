// The staging of one admitted preprocessing request across the two pools, shared by the HTTP
// and gRPC fronts: requests with remote media fetch on the fetch pool (network waits never
// hold a CPU worker) and then decode on the worker pool; requests with only inline, data: or
// local media go straight to the worker pool. A full queue ends the request with
// kResourceExhausted at once. The request's memory reservation lives until `finish` returns,
// so the caller encodes its response inside `finish`, still covered by it.
#pragma once

#include <exception>
#include <functional>
#include <memory>

#include "gateway/net/preprocess_service.h"
#include "gateway/net/worker_pool.h"

namespace m3::net {

struct PreprocessPools {
  std::shared_ptr<WorkerPool> workers;  // decoding and resizing (CPU)
  std::shared_ptr<WorkerPool> fetch;    // fetching media and parsing large bodies (I/O)
};

// Called exactly once, from a pool thread (or the calling thread when nothing could be
// queued): with the result, or with the error (an m3::Error, usually a ParamError).
using PreprocessFinish = std::function<void(PreprocessResult* result, std::exception_ptr error)>;

// `request` must have passed service->Admit.
void StartPreprocess(std::shared_ptr<const PreprocessService> service, const PreprocessPools& pools,
                     PreprocessRequest request, PreprocessFinish finish);

}  // namespace m3::net
