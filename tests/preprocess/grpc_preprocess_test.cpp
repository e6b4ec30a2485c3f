// The gRPC Preprocess service of a real `m3-gateway serve --preprocess-only --grpc-port`.
#include <doctest/doctest.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "gateway/media/media_preprocessor.h"
#include "preprocess.grpc.pb.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace pb = m3::preprocess::v1;

namespace {

grpc::Status Call(pb::Preprocess::Stub& stub, const pb::PreprocessRequest& req,
                  pb::PreprocessResponse* res) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub.Preprocess(&ctx, req, res);
}

}  // namespace

TEST_CASE(
    "gRPC Preprocess returns the media library's tensors and INVALID_ARGUMENT for bad input") {
  m3::test::GatewayProcess gw({"serve", "--preprocess-only", "--port", "0", "--grpc-port", "0",
                               "--model", "tests/data/m3-tiny/model", "--workers", "2",
                               "--allow-media-host", "127.0.0.1:1"});
  REQUIRE(gw.grpc_port() > 0);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(gw.grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = pb::Preprocess::NewStub(channel);

  std::string png = m3::test::ReadFile(m3::test::DataPath("m3-tiny/images/img01_224x224.png"));
  pb::PreprocessRequest req;
  auto* item = req.add_items();
  item->set_kind(pb::MEDIA_KIND_IMAGE);
  item->set_data(png);
  req.mutable_options()->set_max_pixels(150528);
  pb::PreprocessResponse res;
  grpc::Status status = Call(*stub, req, &res);
  REQUIRE_MESSAGE(status.ok(), status.error_message());

  m3::media::MediaPreprocessor direct(m3::media::LoadVisionProcessor("tests/data/m3-tiny/model"),
                                      {});
  m3::media::MediaOptions options;
  options.max_pixels = 150528;
  auto want = direct.ProcessImage(png, options);
  const auto& pv = res.tensors().at("pixel_values");
  CHECK(pv.dtype() == "F32");
  CHECK(std::vector<int64_t>(pv.shape().begin(), pv.shape().end()) == want.pixel_values.shape());
  REQUIRE(pv.data().size() == want.pixel_values.nbytes());
  CHECK(std::memcmp(pv.data().data(), want.pixel_values.data(), pv.data().size()) == 0);
  REQUIRE(res.items_size() == 1);
  CHECK(res.items(0).placeholder_tokens() == want.placeholder_tokens);
  CHECK(res.items(0).prompt_expansion() == want.prompt_expansion);

  auto expect_invalid = [&](const pb::PreprocessRequest& bad) {
    pb::PreprocessResponse ignored;
    grpc::Status s = Call(*stub, bad, &ignored);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_FALSE(s.error_message().empty());
  };
  pb::PreprocessRequest not_image;
  not_image.add_items()->set_kind(pb::MEDIA_KIND_IMAGE);
  not_image.mutable_items(0)->set_data("definitely not an image");
  expect_invalid(not_image);
  pb::PreprocessRequest no_kind;
  no_kind.add_items()->set_data(png);
  expect_invalid(no_kind);
  expect_invalid(pb::PreprocessRequest{});
  pb::PreprocessRequest refused;
  refused.add_items()->set_kind(pb::MEDIA_KIND_IMAGE);
  refused.mutable_items(0)->set_url("http://169.254.169.254/latest/meta-data/");
  expect_invalid(refused);
  pb::PreprocessRequest bad_b64;
  bad_b64.add_items()->set_kind(pb::MEDIA_KIND_IMAGE);
  bad_b64.mutable_items(0)->set_url("data:image/png;base64,@@@");
  expect_invalid(bad_b64);
  // Allowed, but nothing listens there: the client's URL, like HTTP's 400.
  pb::PreprocessRequest unreachable;
  unreachable.add_items()->set_kind(pb::MEDIA_KIND_IMAGE);
  unreachable.mutable_items(0)->set_url("http://127.0.0.1:1/a.png");
  expect_invalid(unreachable);

  grpc::ClientContext hctx;
  hctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::HealthResponse health;
  CHECK(stub->Health(&hctx, pb::HealthRequest{}, &health).ok());
  CHECK(health.ok());
}

TEST_CASE("gRPC: an unparseable message is INVALID_ARGUMENT saying so (issue 11 row 10)") {
  m3::test::GatewayProcess gw(
      {"serve", "--preprocess-only", "--port", "0", "--grpc-port", "0", "--workers", "1"});
  REQUIRE(gw.grpc_port() > 0);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(gw.grpc_port()),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  // Field 1 (items) declared as a 1000-byte message with 3 bytes present: not a valid message.
  const std::string garbage(
      "\x0a\xe8\x07"
      "abc",
      6);
  grpc::Slice slice(garbage.data(), garbage.size());
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&ctx, "/m3.preprocess.v1.Preprocess/Preprocess", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) {
                      std::lock_guard lock(mu);
                      status = std::move(s);
                      done = true;
                      cv.notify_all();
                    });
  std::unique_lock lock(mu);
  REQUIRE(cv.wait_for(lock, std::chrono::seconds(40), [&] { return done; }));
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message().find("not a valid m3.preprocess.v1.PreprocessRequest") !=
        std::string::npos);
}
