// The HTTP front of the preprocessing service: routes GET /health and POST /v1/preprocess,
// hands the work to the worker pool (429 at once when its queue is full) and encodes the
// answer as safetensors or JSON, or an OpenAI-style error body.
#pragma once

#include <memory>

#include "gateway/net/http_server.h"
#include "gateway/net/preprocess_service.h"
#include "gateway/net/worker_pool.h"

namespace m3::net {

HttpHandler MakePreprocessHttpHandler(std::shared_ptr<const PreprocessService> service,
                                      std::shared_ptr<WorkerPool> pool);

}  // namespace m3::net
