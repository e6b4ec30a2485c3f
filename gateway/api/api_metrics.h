// The API server's Prometheus metrics, registered once on a net::Registry and kept as
// references for the hot path: requests by endpoint and status, request latency, time to first
// token, inter-token latency, the gateway's own time before a request reaches an engine,
// preprocessing time per modality, requests in flight, and (read at scrape time) the media
// queue depth and each engine's health and outstanding requests (labelled engine="0", "1", ...
// by the engine's place in the --engine list, never by its address).
#pragma once

#include <memory>
#include <string>

#include "gateway/engine_client/engine_router.h"
#include "gateway/net/metrics.h"
#include "gateway/net/worker_pool.h"

namespace m3::api {

class ApiMetrics {
 public:
  ApiMetrics();

  // Scrape-time gauges of the engines and the pools; both must outlive this object.
  void WatchEngines(const engine_client::EngineRouter& router);
  void WatchPools(std::shared_ptr<net::WorkerPool> workers, std::shared_ptr<net::WorkerPool> fetch);

  void RecordRequest(const std::string& endpoint, int status, double seconds);
  void RecordFirstToken(double seconds) { ttft_.Observe(seconds); }
  void RecordInterToken(double seconds) { itl_.Observe(seconds); }
  // Arrival to the engine request being sent: parsing, media, prompt; the gateway's share.
  void RecordSetup(double seconds) { setup_.Observe(seconds); }
  // One media item's fetch + decode + resize (modality: "image" or "video").
  void RecordPreprocess(const std::string& modality, double seconds);
  net::Gauge& in_flight() { return in_flight_; }

  std::string Render() const { return registry_.Render(); }

 private:
  net::Registry registry_;
  net::CounterFamily& requests_;
  net::HistogramFamily& latency_;
  net::Histogram& ttft_;
  net::Histogram& itl_;
  net::Histogram& setup_;
  net::HistogramFamily& preprocess_;
  net::Gauge& in_flight_;
  net::GaugeFamily& engine_healthy_;
  net::GaugeFamily& engine_outstanding_;
  // Speculative decoding counters of each engine, as its last Health answer gave them.
  net::GaugeFamily& engine_spec_drafts_;
  net::GaugeFamily& engine_spec_accepted_;
  net::GaugeFamily& engine_spec_verifies_;
  net::GaugeFamily& queue_depth_;
};

}  // namespace m3::api
