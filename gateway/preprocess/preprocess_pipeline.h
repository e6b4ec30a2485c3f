// The staging of one admitted preprocessing request, shared by the HTTP and gRPC fronts. All
// of a request's media items start at once: http(s) items are fetched as coroutines on the
// shared FetchContext (network waits hold no thread), and each item is decoded on the worker
// pool as soon as its bytes are there; inline, data: and local items are read and decoded on
// the worker pool. Every fetch runs under the request's one deadline and the items share its
// byte budget; the first error ends the request (items still in flight are ignored) and the
// result keeps the request's item order. A full queue ends the request with
// kResourceExhausted at once. The request's memory reservation lives until `finish` returns,
// so the caller encodes its response inside `finish`, still covered by it.
#pragma once

#include <exception>
#include <functional>
#include <memory>

#include "gateway/net/worker_pool.h"
#include "gateway/preprocess/preprocess_service.h"

namespace m3::preprocess {

struct PreprocessPools {
  std::shared_ptr<net::WorkerPool> workers;  // decoding and resizing (CPU)
  std::shared_ptr<net::WorkerPool> fetch;    // blocking I/O off the network threads (large bodies)
};

// Called exactly once, from a pool or network thread (or the calling thread when nothing
// could be queued): with the result, or with the error (an m3::Error, usually a net::ParamError).
// Keep it short: it may run on a fetch network thread when a fetch fails.
using PreprocessFinish = std::function<void(PreprocessResult* result, std::exception_ptr error)>;

// `request` must have passed service->Admit. Does not block.
void StartPreprocess(std::shared_ptr<const PreprocessService> service, const PreprocessPools& pools,
                     PreprocessRequest request, PreprocessFinish finish);

}  // namespace m3::preprocess
