// Bad input over gRPC: each malformed request gets INVALID_ARGUMENT with a message naming the
// problem, and the same server then still answers a good request.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "tests/engine_server/grpc_test_client.h"
#include "tests/engine_server/server_process.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

TEST_CASE("bad requests get INVALID_ARGUMENT naming the problem; the server keeps serving") {
  const SafetensorsFile cases = SafetensorsFile::Open(DataPath("m3-tiny/model_cases.safetensors"));
  ServerProcess server("m3-tiny/model", {"--kv-pages", "64"});  // 512 tokens of KV
  auto stub = server.Stub();
  const v1::GenerateRequest image = GoldenRequest(cases, "image");
  const v1::GenerateRequest video = GoldenRequest(cases, "video");
  struct Bad {
    const char* what;
    std::function<void(v1::GenerateRequest&)> mutate;
    const char* needle;
  };
  const Bad bad[] = {
      {"pixel bytes not matching the shape",
       [](auto& r) {
         auto* d = r.mutable_media(0)->mutable_pixel_values()->mutable_data();
         d->resize(d->size() - 4);
       },
       "bytes"},
      {"unknown dtype",
       [](auto& r) { r.mutable_media(0)->mutable_pixel_values()->set_dtype("F16"); }, "dtype"},
      {"pixel shape not 2-D",
       [](auto& r) { r.mutable_media(0)->mutable_pixel_values()->add_shape(1); }, "shape"},
      {"grid not matching the placeholder count",
       [](auto& r) {
         auto* m = r.mutable_media(0);
         m->set_grid_thw(1, m->grid_thw(1) + 2);
       },
       "grid"},
      {"declared placeholder tokens wrong",
       [](auto& r) { r.mutable_media(0)->set_placeholder_tokens(3); }, "placeholder"},
      {"placeholders without media", [](auto& r) { r.clear_media(); }, "placeholder"},
      {"grid values past 2^62 (their product overflows)",
       [](auto& r) {
         auto* m = r.mutable_media(0);
         for (int k = 0; k < 3; ++k) m->set_grid_thw(k, int64_t{1} << 62);
       },
       "grid_thw values"},
      {"grid at the bound, rows x patch size past 2^64",
       [](auto& r) {
         auto* m = r.mutable_media(0);
         for (int k = 0; k < 3; ++k) m->set_grid_thw(k, int64_t{1} << 20);
       },
       "patch rows"},
      {"grid with two values",
       [](auto& r) { r.mutable_media(0)->mutable_grid_thw()->RemoveLast(); }, "grid_thw"},
      {"token id out of range", [](auto& r) { r.set_token_ids(3, 512); }, "vocabulary"},
      {"negative token id", [](auto& r) { r.set_token_ids(0, -1); }, "vocabulary"},
      {"prompt beyond the context / KV",
       [](auto& r) {
         while (r.token_ids_size() < 600) r.add_token_ids(7);
       },
       "at most"},
      {"empty prompt",
       [](auto& r) {
         r.clear_token_ids();
         r.clear_media();
       },
       "empty"},
      {"max_tokens = 0", [](auto& r) { r.mutable_sampling()->set_max_tokens(0); }, "max_tokens"},
      {"max_tokens < 0", [](auto& r) { r.mutable_sampling()->set_max_tokens(-5); }, "max_tokens"},
      {"NaN pixels",
       [](auto& r) {
         auto* d = r.mutable_media(0)->mutable_pixel_values()->mutable_data();
         const float nan = std::numeric_limits<float>::quiet_NaN();
         std::memcpy(d->data() + 40, &nan, 4);
       },
       "finite"},
      {"infinite pixels",
       [](auto& r) {
         auto* d = r.mutable_media(0)->mutable_pixel_values()->mutable_data();
         const float inf = std::numeric_limits<float>::infinity();
         std::memcpy(d->data() + 4, &inf, 4);
       },
       "finite"},
      {"media kind unspecified",
       [](auto& r) { r.mutable_media(0)->set_kind(v1::MultimodalItem::KIND_UNSPECIFIED); }, "kind"},
      {"top_p out of range", [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); }, "top_p"},
      {"negative temperature", [](auto& r) { r.mutable_sampling()->set_temperature(-1); },
       "temperature"},
      {"stop token out of range", [](auto& r) { r.mutable_sampling()->add_stop_token_ids(100000); },
       "stop_token_ids"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.what);
    v1::GenerateRequest r = image;
    b.mutate(r);
    StreamResult got = RunStream(*stub, r);
    CHECK(got.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_MESSAGE(got.status.error_message().find(b.needle) != std::string::npos,
                  got.status.error_message());
    CHECK(got.tokens.empty());
  }
  // A video whose grid does not divide into merge blocks.
  v1::GenerateRequest v = video;
  v.mutable_media(0)->set_grid_thw(2, v.media(0).grid_thw(2) + 1);
  CHECK(RunStream(*stub, v).status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  // A duplicate id while the first runs.
  {
    v1::GenerateRequest long_req = GoldenRequest(cases, "text");
    long_req.set_request_id("dup");
    long_req.mutable_sampling()->set_max_tokens(300);
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, long_req);
    v1::GenerateResponse msg;
    REQUIRE(reader->Read(&msg));
    StreamResult dup = RunStream(*stub, long_req);
    CHECK(dup.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(dup.status.error_message().find("dup") != std::string::npos);
    ctx.TryCancel();
    reader->Finish();
  }
  CHECK(WaitPagesFree(*stub, 2000));
  StreamResult ok = RunStream(*stub, image);
  CHECK(ok.status.ok());
  CHECK(ok.tokens == GoldenTokens(cases, "image"));
}

}  // namespace
}  // namespace m3::test
