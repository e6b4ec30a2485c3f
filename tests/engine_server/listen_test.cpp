// How `m3-engine serve` listens: alone on its port (a second engine on a held port exits
// non-zero naming the address, where gRPC's default SO_REUSEPORT let it start and take half the
// connections), on loopback unless --host says otherwise (read back from /proc/net/tcp*), the
// optional API key checked on every RPC (--api-key or M3_ENGINE_API_KEY), and the receive limit
// sized from the model: the largest legal request fits, a larger message is refused.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/engine_server/grpc_test_client.h"
#include "tests/engine_server/server_process.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

// The local addresses (hex, as the kernel writes them) of TCP sockets listening on `port`.
std::vector<std::string> ListeningAddresses(int port) {
  char hex_port[8];
  std::snprintf(hex_port, sizeof hex_port, "%04X", port);
  std::vector<std::string> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const size_t colon = local.rfind(':');
      if (state == "0A" && colon != std::string::npos && local.substr(colon + 1) == hex_port)
        found.push_back(local.substr(0, colon));
    }
  }
  return found;
}

v1::GenerateRequest TextRequest() {
  v1::GenerateRequest r;
  for (int t : {1, 2, 3, 4}) r.add_token_ids(t);
  r.mutable_sampling()->set_max_tokens(3);
  r.mutable_sampling()->set_temperature(0);
  return r;
}

// Every RPC with `authorization` (empty: none sent); the status codes in the order Health,
// ModelInfo, Abort, Generate.
std::vector<grpc::StatusCode> CallAll(v1::Engine::Stub& stub, const std::string& authorization) {
  std::vector<grpc::StatusCode> codes;
  auto context = [&] {
    auto c = std::make_unique<grpc::ClientContext>();
    if (!authorization.empty()) c->AddMetadata("authorization", authorization);
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return c;
  };
  {
    v1::HealthResponse r;
    codes.push_back(stub.Health(context().get(), {}, &r).error_code());
  }
  {
    v1::ModelInfoResponse r;
    codes.push_back(stub.ModelInfo(context().get(), {}, &r).error_code());
  }
  {
    v1::AbortRequest q;
    q.set_request_id("none");
    v1::AbortResponse r;
    codes.push_back(stub.Abort(context().get(), q, &r).error_code());
  }
  {
    auto c = context();
    auto reader = stub.Generate(c.get(), TextRequest());
    v1::GenerateResponse msg;
    int tokens = 0;
    while (reader->Read(&msg)) tokens += msg.token_ids_size();
    const grpc::Status s = reader->Finish();
    codes.push_back(s.error_code());
    if (s.ok()) CHECK(tokens == 3);
  }
  return codes;
}

const std::vector<grpc::StatusCode> kAllOk(4, grpc::StatusCode::OK);
const std::vector<grpc::StatusCode> kAllRefused(4, grpc::StatusCode::UNAUTHENTICATED);

TEST_CASE("a second engine on a held port exits non-zero naming the address") {
  ServerProcess first("m3-tiny/model");
  const std::string port = std::to_string(first.port());
  // `timeout`: an engine that starts anyway (sharing the port) is stopped and fails the checks.
  for (const std::vector<std::string>& host :
       std::vector<std::vector<std::string>>{{}, {"--host", "127.0.0.1"}, {"--host", "0.0.0.0"}}) {
    std::vector<std::string> argv = {"/usr/bin/timeout",
                                     "60",
                                     BinPath("m3-engine"),
                                     "serve",
                                     "--model",
                                     DataPath("m3-tiny/model"),
                                     "--port",
                                     port};
    argv.insert(argv.end(), host.begin(), host.end());
    const ProcessResult r = RunProcess(argv);
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("listening") == std::string::npos);
    CHECK(r.err.find("m3-engine: error") != std::string::npos);
    CHECK(r.err.find("cannot listen on") != std::string::npos);
    CHECK(r.err.find(":" + port + ": the port is held by another process") != std::string::npos);
  }
  // The first one still has the port to itself and serves.
  auto stub = first.Stub();
  CHECK(Health(*stub).status() == v1::HealthResponse::STATUS_SERVING);
  CHECK(RunStream(*stub, TextRequest()).status.ok());
}

TEST_CASE("engines listen on loopback unless --host says otherwise") {
  {
    ServerProcess engine("m3-tiny/model");
    const std::vector<std::string> addresses = ListeningAddresses(engine.port());
    REQUIRE(addresses.size() == 1);
    // 127.0.0.1, on an IPv4 socket or an IPv6 one as ::ffff:127.0.0.1 (gRPC takes either).
    CHECK((addresses[0] == "0100007F" || addresses[0] == "0000000000000000FFFF00000100007F"));
  }
  {
    ServerProcess engine("m3-tiny/model", {"--host", "0.0.0.0"});
    const std::vector<std::string> addresses = ListeningAddresses(engine.port());
    REQUIRE(addresses.size() == 1);
    // Every interface: 0.0.0.0, or [::] where gRPC takes a dual-stack socket.
    CHECK(addresses[0].find_first_not_of('0') == std::string::npos);
    CHECK(Health(*engine.Stub()).status() == v1::HealthResponse::STATUS_SERVING);
  }
}

TEST_CASE("--api-key: every RPC needs 'authorization: Bearer KEY', else UNAUTHENTICATED") {
  ServerProcess engine("m3-tiny/model", {"--api-key", "s3cret-key"});
  auto stub = engine.Stub();
  CHECK(CallAll(*stub, "") == kAllRefused);
  CHECK(CallAll(*stub, "Bearer wrong-key") == kAllRefused);
  CHECK(CallAll(*stub, "Bearer s3cret-key-and-more") == kAllRefused);
  CHECK(CallAll(*stub, "Bearer s3cret-ke") == kAllRefused);
  CHECK(CallAll(*stub, "Basic s3cret-key") == kAllRefused);
  CHECK(CallAll(*stub, "s3cret-key") == kAllRefused);
  CHECK(CallAll(*stub, "Bearer s3cret-key") == kAllOk);
  CHECK(CallAll(*stub, "bearer s3cret-key") == kAllOk);  // RFC 9110: case-insensitive scheme

  // Without a key configured nothing is asked for.
  ServerProcess open_engine("m3-tiny/model");
  CHECK(CallAll(*open_engine.Stub(), "") == kAllOk);
}

TEST_CASE("M3_ENGINE_API_KEY sets the key from the environment (kept out of ps)") {
  setenv("M3_ENGINE_API_KEY", "env-key", 1);
  std::unique_ptr<ServerProcess> engine;
  try {
    engine = std::make_unique<ServerProcess>("m3-tiny/model");
  } catch (...) {
    unsetenv("M3_ENGINE_API_KEY");
    throw;
  }
  unsetenv("M3_ENGINE_API_KEY");
  auto stub = engine->Stub();
  CHECK(CallAll(*stub, "") == kAllRefused);
  CHECK(CallAll(*stub, "Bearer env-key") == kAllOk);
  // An empty --api-key is a mistake, not "no authentication".
  const ProcessResult r = RunProcess({BinPath("m3-engine"), "serve", "--model",
                                      DataPath("m3-tiny/model"), "--port", "0", "--api-key", ""});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("--api-key is empty") != std::string::npos);
}

TEST_CASE("the receive limit fits the model's largest legal request and no more") {
  ServerProcess engine("m3-tiny/model");
  auto stub = engine.Stub();
  v1::ModelInfoResponse info;
  {
    grpc::ClientContext c;
    REQUIRE(stub->ModelInfo(&c, {}, &info).ok());
  }
  const int64_t limit = info.max_message_bytes();
  MESSAGE("m3-tiny: max_prompt_tokens ", info.max_prompt_tokens(), ", patch_dim ", info.patch_dim(),
          ", message limit ", limit, " bytes");
  CHECK(limit > 0);
  CHECK(limit < (int64_t{1} << 30));  // the old fixed limit

  // The largest legal request: the longest prompt, every token an image placeholder (the
  // largest vocabulary id, 5 bytes as a varint, would be larger still: use it for the rest),
  // one image whose grid makes that many placeholders, F32 pixels, the most stop ids.
  REQUIRE(info.patch_dim() > 0);
  const int64_t merge = std::max<int64_t>(info.spatial_merge_size(), 1);
  const int64_t tokens = info.max_prompt_tokens();
  v1::GenerateRequest big;
  big.set_request_id(std::string(256, 'r'));
  for (int64_t i = 0; i < tokens; ++i)
    big.add_token_ids(static_cast<int32_t>(i == 0 ? info.image_token_id() : info.vocab_size() - 1));
  for (int64_t i = 0; i < info.vocab_size(); ++i)
    big.mutable_sampling()->add_stop_token_ids(static_cast<int32_t>(info.vocab_size() - 1));
  v1::MultimodalItem* image = big.add_media();
  image->set_kind(v1::MultimodalItem::KIND_IMAGE);
  image->add_grid_thw(1);
  image->add_grid_thw(merge);
  image->add_grid_thw(tokens * merge);
  image->set_placeholder_tokens(tokens);
  const int64_t rows = tokens * merge * merge;
  image->mutable_pixel_values()->set_dtype("F32");
  image->mutable_pixel_values()->add_shape(rows);
  image->mutable_pixel_values()->add_shape(info.patch_dim());
  image->mutable_pixel_values()->set_data(
      std::string(static_cast<size_t>(rows * info.patch_dim() * 4), '\x7f'));
  const auto legal_bytes = static_cast<int64_t>(big.ByteSizeLong());
  MESSAGE("largest legal request: ", legal_bytes, " bytes");
  CHECK(legal_bytes <= limit);
  CHECK(legal_bytes * 4 > limit);  // a bound, not a blanket

  // Past the limit: refused by the transport, and the engine keeps serving.
  v1::GenerateRequest over = TextRequest();
  over.set_request_id("over");
  v1::MultimodalItem* blob = over.add_media();
  blob->set_kind(v1::MultimodalItem::KIND_IMAGE);
  blob->mutable_pixel_values()->set_data(std::string(static_cast<size_t>(limit), '\0'));
  CHECK(RunStream(*stub, over).status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(RunStream(*stub, TextRequest()).status.ok());

  // --max-message-mb still overrides the computed limit.
  ServerProcess fixed("m3-tiny/model", {"--max-message-mb", "3"});
  grpc::ClientContext c;
  REQUIRE(fixed.Stub()->ModelInfo(&c, {}, &info).ok());
  CHECK(info.max_message_bytes() == 3 << 20);
}

TEST_CASE("more stop_token_ids than the vocabulary is refused naming the field") {
  ServerProcess engine("m3-tiny/model");
  auto stub = engine.Stub();
  v1::ModelInfoResponse info;
  grpc::ClientContext c;
  REQUIRE(stub->ModelInfo(&c, {}, &info).ok());
  v1::GenerateRequest r = TextRequest();
  for (int64_t i = 0; i <= info.vocab_size(); ++i) r.mutable_sampling()->add_stop_token_ids(1);
  const StreamResult s = RunStream(*stub, r);
  CHECK(s.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.status.error_message().find("stop_token_ids") != std::string::npos);
}

}  // namespace
}  // namespace m3::test
