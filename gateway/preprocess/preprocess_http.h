// The HTTP front of the preprocessing service: routes GET /health and POST /v1/preprocess.
// Refusals that need only the header (unknown route, wrong method, full worker queue) happen
// before the body is read; the body is parsed and admitted (PreprocessService::Admit) before
// anything is queued, so invalid requests are answered at once and never wait behind media
// work. Valid requests fetch on the fetch pool (network waits never hold a CPU worker), then
// decode on the worker pool (429 at once when its queue is full); the answer is safetensors or
// JSON, or an OpenAI-style error body.
#pragma once

#include <memory>

#include "gateway/net/http_server.h"
#include "gateway/preprocess/preprocess_pipeline.h"

namespace m3::preprocess {

net::HttpHandler MakePreprocessHttpHandler(std::shared_ptr<const PreprocessService> service,
                                           PreprocessPools pools);
net::HttpHeaderCheck MakePreprocessHeaderCheck(PreprocessPools pools);

}  // namespace m3::preprocess
