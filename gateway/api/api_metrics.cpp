// The API server's metrics (see api_metrics.h).
#include "gateway/api/api_metrics.h"

namespace m3::api {

ApiMetrics::ApiMetrics()
    : requests_(registry_.AddCounterFamily("m3_gateway_requests_total",
                                           "HTTP requests answered, by endpoint and status",
                                           {"endpoint", "status"})),
      latency_(registry_.AddHistogramFamily(
          "m3_gateway_request_duration_seconds",
          "Arrival to the last byte of the response (streams: to their end), by endpoint",
          {"endpoint"}, net::ExponentialBuckets(0.0005, 2, 18))),
      ttft_(registry_.AddHistogram("m3_gateway_time_to_first_token_seconds",
                                   "Arrival of a generation request to its first token",
                                   net::ExponentialBuckets(0.001, 2, 16))),
      itl_(registry_.AddHistogram("m3_gateway_inter_token_latency_seconds",
                                  "Time between consecutive tokens of one generation",
                                  net::ExponentialBuckets(0.0005, 2, 14))),
      setup_(registry_.AddHistogram(
          "m3_gateway_request_setup_seconds",
          "Arrival of a generation request to its engine request: parsing, media, prompt",
          net::ExponentialBuckets(0.0001, 2, 18))),
      preprocess_(registry_.AddHistogramFamily(
          "m3_gateway_preprocess_seconds", "One media item's fetch, decode and resize, by modality",
          {"modality"}, net::ExponentialBuckets(0.001, 2, 15))),
      in_flight_(registry_.AddGauge("m3_gateway_requests_in_flight",
                                    "Generation requests admitted and not yet answered")),
      engine_healthy_(registry_.AddGaugeFamily(
          "m3_gateway_engine_healthy", "1 when the engine is admitted, else 0", {"engine"})),
      engine_outstanding_(registry_.AddGaugeFamily("m3_gateway_engine_outstanding_requests",
                                                   "Requests the gateway has on the engine",
                                                   {"engine"})),
      engine_spec_drafts_(registry_.AddGaugeFamily(
          "m3_gateway_engine_spec_draft_tokens",
          "Speculative draft tokens the engine verified since it started", {"engine"})),
      engine_spec_accepted_(registry_.AddGaugeFamily(
          "m3_gateway_engine_spec_accepted_tokens",
          "Speculative draft tokens the engine accepted since it started", {"engine"})),
      engine_spec_verifies_(registry_.AddGaugeFamily(
          "m3_gateway_engine_spec_verifies",
          "Sequence-steps the engine verified drafts in since it started", {"engine"})),
      queue_depth_(registry_.AddGaugeFamily(
          "m3_gateway_queue_depth", "Media jobs waiting for a thread, by pool", {"pool"})) {}

void ApiMetrics::WatchEngines(const engine_client::EngineRouter& router) {
  // Engines are labelled by their place in the --engine list: /metrics is open to scrapers,
  // and an engine's address (a host and port with no authentication of their own) is for
  // callers with the gateway's key, where /ready lists each index with its address.
  registry_.AddScrapeHook([this, &router] {
    const auto& endpoints = router.endpoints();
    for (size_t i = 0; i < endpoints.size(); ++i) {
      const std::string label = std::to_string(i);
      const auto& e = endpoints[i];
      engine_healthy_.WithLabels({label}).Set(e->healthy() ? 1 : 0);
      engine_outstanding_.WithLabels({label}).Set(e->outstanding());
      if (const auto h = e->last_health()) {
        engine_spec_drafts_.WithLabels({label}).Set(static_cast<double>(h->spec_draft_tokens()));
        engine_spec_accepted_.WithLabels({label}).Set(
            static_cast<double>(h->spec_accepted_tokens()));
        engine_spec_verifies_.WithLabels({label}).Set(static_cast<double>(h->spec_verifies()));
      }
    }
  });
}

void ApiMetrics::WatchPools(std::shared_ptr<net::WorkerPool> workers,
                            std::shared_ptr<net::WorkerPool> fetch) {
  registry_.AddScrapeHook([this, workers, fetch] {
    queue_depth_.WithLabels({"media"}).Set(static_cast<double>(workers->queued()));
    queue_depth_.WithLabels({"fetch"}).Set(static_cast<double>(fetch->queued()));
  });
}

void ApiMetrics::RecordRequest(const std::string& endpoint, int status, double seconds) {
  requests_.WithLabels({endpoint, std::to_string(status)}).Inc();
  latency_.WithLabels({endpoint}).Observe(seconds);
}

void ApiMetrics::RecordPreprocess(const std::string& modality, double seconds) {
  preprocess_.WithLabels({modality}).Observe(seconds);
}

}  // namespace m3::api
