// ApiKeyCheck: the engine's optional shared token. When a key is configured every RPC must
// carry it as gRPC metadata "authorization: Bearer KEY" (the gateway sends it); anything else
// is answered UNAUTHENTICATED before the request is looked at.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

namespace m3::engine::server {

// OK when `key` is empty (no authentication) or the call carries it; UNAUTHENTICATED else.
grpc::Status CheckApiKey(const grpc::CallbackServerContext& context, const std::string& key);

}  // namespace m3::engine::server
