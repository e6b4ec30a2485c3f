// RunStream, GoldenRequest, Health polling.
#include "tests/engine_server/grpc_test_client.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "shared/tensor.h"

namespace m3::test {

StreamResult RunStream(v1::Engine::Stub& stub, const v1::GenerateRequest& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  StreamResult r;
  auto reader = stub.Generate(&ctx, request);
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
    ++r.messages;
    r.tokens.insert(r.tokens.end(), msg.token_ids().begin(), msg.token_ids().end());
    r.logprobs.insert(r.logprobs.end(), msg.logprobs().begin(), msg.logprobs().end());
    r.last = msg;
  }
  r.status = reader->Finish();
  return r;
}

std::vector<int32_t> GoldenTokens(const SafetensorsFile& cases, const std::string& prefix) {
  auto v = ToInt64(cases.Get(prefix + ".greedy_tokens"), prefix);
  return {v.begin(), v.end()};
}

v1::GenerateRequest GoldenRequest(const SafetensorsFile& cases, const std::string& prefix,
                                  bool bf16) {
  v1::GenerateRequest req;
  req.set_request_id(prefix);
  for (int64_t t : ToInt64(cases.Get(prefix + ".input_ids"), prefix))
    req.add_token_ids(static_cast<int32_t>(t));
  for (bool video : {false, true}) {
    const std::string pix = prefix + (video ? ".pixel_values_videos" : ".pixel_values");
    const std::string grid = prefix + (video ? ".video_grid_thw" : ".image_grid_thw");
    if (!cases.Has(pix)) continue;
    const std::vector<float> px = ToFloat32(cases.Get(pix), pix);
    const int64_t dim = cases.Get(pix).shape[1];
    const std::vector<int64_t> g = ToInt64(cases.Get(grid), grid);
    int64_t row = 0;
    for (size_t i = 0; i + 2 < g.size(); i += 3) {
      const int64_t rows = g[i] * g[i + 1] * g[i + 2];
      v1::MultimodalItem* m = req.add_media();
      m->set_kind(video ? v1::MultimodalItem::KIND_VIDEO : v1::MultimodalItem::KIND_IMAGE);
      for (size_t k = 0; k < 3; ++k) m->add_grid_thw(g[i + k]);
      auto* t = m->mutable_pixel_values();
      t->add_shape(rows);
      t->add_shape(dim);
      const float* src = px.data() + row * dim;
      const size_t n = static_cast<size_t>(rows * dim);
      if (bf16) {
        t->set_dtype("BF16");
        std::string bytes(n * 2, '\0');
        for (size_t j = 0; j < n; ++j) {
          uint32_t bits;
          std::memcpy(&bits, src + j, 4);
          bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
          const uint16_t h = static_cast<uint16_t>(bits >> 16);
          std::memcpy(bytes.data() + 2 * j, &h, 2);
        }
        t->set_data(std::move(bytes));
      } else {
        t->set_dtype("F32");
        t->set_data(std::string(reinterpret_cast<const char*>(src), n * 4));
      }
      row += rows;
    }
  }
  auto* s = req.mutable_sampling();
  s->set_temperature(0);
  s->set_ignore_eos(true);
  s->set_max_tokens(static_cast<int32_t>(GoldenTokens(cases, prefix).size()));
  return req;
}

v1::HealthResponse Health(v1::Engine::Stub& stub) {
  grpc::ClientContext ctx;
  v1::HealthResponse h;
  stub.Health(&ctx, v1::HealthRequest(), &h);
  return h;
}

bool WaitPagesFree(v1::Engine::Stub& stub, int timeout_ms) {
  for (int waited = 0; waited <= timeout_ms; waited += 5) {
    v1::HealthResponse h = Health(stub);
    if (h.kv_pages_used() == 0 && h.running_requests() == 0 && h.waiting_requests() == 0)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace m3::test
