// The Prometheus registry: exact text exposition output (HELP/TYPE, label escaping, cumulative
// buckets with +Inf, _sum and _count), registration checks, and counts under concurrent use.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "gateway/net/metrics.h"
#include "shared/error.h"

using namespace m3::net;

TEST_CASE("counters and gauges render with HELP, TYPE and their labels") {
  Registry r;
  Counter& requests = r.AddCounter("m3_requests_total", "Requests received.");
  CounterFamily& by_status =
      r.AddCounterFamily("m3_responses_total", "Responses by route and status.", {"route", "code"});
  Gauge& depth = r.AddGauge("m3_queue_depth", "Requests waiting.");
  requests.Inc();
  requests.Inc(2);
  by_status.WithLabels({"/v1/chat/completions", "200"}).Inc(5);
  by_status.WithLabels({"/v1/chat/completions", "400"}).Inc();
  by_status.WithLabels({"/health", "200"}).Inc(0.5);
  depth.Set(7);
  depth.Dec();
  CHECK(r.Render() ==
        "# HELP m3_requests_total Requests received.\n"
        "# TYPE m3_requests_total counter\n"
        "m3_requests_total 3\n"
        "# HELP m3_responses_total Responses by route and status.\n"
        "# TYPE m3_responses_total counter\n"
        "m3_responses_total{route=\"/health\",code=\"200\"} 0.5\n"
        "m3_responses_total{route=\"/v1/chat/completions\",code=\"200\"} 5\n"
        "m3_responses_total{route=\"/v1/chat/completions\",code=\"400\"} 1\n"
        "# HELP m3_queue_depth Requests waiting.\n"
        "# TYPE m3_queue_depth gauge\n"
        "m3_queue_depth 6\n");
}

TEST_CASE("the same label values name the same series") {
  Registry r;
  GaugeFamily& g = r.AddGaugeFamily("engine_up", "Engine health.", {"engine"});
  Gauge& a = g.WithLabels({"127.0.0.1:1"});
  CHECK(&a == &g.WithLabels({"127.0.0.1:1"}));
  CHECK(&a != &g.WithLabels({"127.0.0.1:2"}));
  CHECK_THROWS_AS(g.WithLabels({}), m3::Error);
  CHECK_THROWS_AS(g.WithLabels({"a", "b"}), m3::Error);
}

TEST_CASE("label values and help text are escaped") {
  Registry r;
  r.AddGaugeFamily("x", "Back\\slash and\nnewline, \"quotes\" kept.", {"v"})
      .WithLabels({"a\"b\\c\nd"})
      .Set(1);
  CHECK(r.Render() ==
        "# HELP x Back\\\\slash and\\nnewline, \"quotes\" kept.\n"
        "# TYPE x gauge\n"
        "x{v=\"a\\\"b\\\\c\\nd\"} 1\n");
  CHECK(EscapeLabelValue("plain") == "plain");
  CHECK(kMetricsContentType == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(EscapeLabelValue("") == "");
}

TEST_CASE("histograms: cumulative buckets with +Inf, _sum and _count") {
  Registry r;
  Histogram& h = r.AddHistogram("ttft_seconds", "Time to first token.", {0.005, 0.1, 1});
  h.Observe(0.001);
  h.Observe(0.005);  // on a bound: le is inclusive
  h.Observe(0.05);
  h.Observe(2.5);
  h.Observe(0.5);
  CHECK(r.Render() ==
        "# HELP ttft_seconds Time to first token.\n"
        "# TYPE ttft_seconds histogram\n"
        "ttft_seconds_bucket{le=\"0.005\"} 2\n"
        "ttft_seconds_bucket{le=\"0.1\"} 3\n"
        "ttft_seconds_bucket{le=\"1\"} 4\n"
        "ttft_seconds_bucket{le=\"+Inf\"} 5\n"
        "ttft_seconds_sum 3.056\n"
        "ttft_seconds_count 5\n");
}

TEST_CASE("labelled histograms put le last; empty series render zeros") {
  Registry r;
  HistogramFamily& f =
      r.AddHistogramFamily("prep_seconds", "Preprocessing.", {"modality"}, {0.25, 0.5});
  f.WithLabels({"video"});
  f.WithLabels({"image"}).Observe(0.25);
  r.AddCounterFamily("unused_total", "No series yet.", {"a"});
  CHECK(r.Render() ==
        "# HELP prep_seconds Preprocessing.\n"
        "# TYPE prep_seconds histogram\n"
        "prep_seconds_bucket{modality=\"image\",le=\"0.25\"} 1\n"
        "prep_seconds_bucket{modality=\"image\",le=\"0.5\"} 1\n"
        "prep_seconds_bucket{modality=\"image\",le=\"+Inf\"} 1\n"
        "prep_seconds_sum{modality=\"image\"} 0.25\n"
        "prep_seconds_count{modality=\"image\"} 1\n"
        "prep_seconds_bucket{modality=\"video\",le=\"0.25\"} 0\n"
        "prep_seconds_bucket{modality=\"video\",le=\"0.5\"} 0\n"
        "prep_seconds_bucket{modality=\"video\",le=\"+Inf\"} 0\n"
        "prep_seconds_sum{modality=\"video\"} 0\n"
        "prep_seconds_count{modality=\"video\"} 0\n"
        "# HELP unused_total No series yet.\n"
        "# TYPE unused_total counter\n");
}

TEST_CASE("values: shortest round-trip form, infinities and NaN as Prometheus spells them") {
  CHECK(FormatMetricValue(0) == "0");
  CHECK(FormatMetricValue(42) == "42");
  CHECK(FormatMetricValue(-1.5) == "-1.5");
  CHECK(FormatMetricValue(0.1) == "0.1");
  CHECK(FormatMetricValue(1e-05) == "1e-05");
  CHECK(FormatMetricValue(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(FormatMetricValue(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(FormatMetricValue(std::nan("")) == "NaN");
  Histogram h(std::vector<double>{1});
  h.Observe(std::nan(""));
  const Histogram::Snapshot s = h.Read();
  CHECK(s.cumulative == std::vector<uint64_t>{0, 1});
  CHECK(s.count == 1);
}

TEST_CASE("bucket helpers") {
  CHECK(ExponentialBuckets(0.001, 10, 4) == std::vector<double>{0.001, 0.01, 0.1, 1});
  CHECK(LinearBuckets(1, 2, 3) == std::vector<double>{1, 3, 5});
  CHECK_THROWS_AS(ExponentialBuckets(0, 2, 3), m3::Error);
  CHECK_THROWS_AS(ExponentialBuckets(1, 1, 3), m3::Error);
  CHECK_THROWS_AS(LinearBuckets(0, 0, 3), m3::Error);
  CHECK_THROWS_AS(LinearBuckets(0, 1, 0), m3::Error);
}

TEST_CASE("registration refuses bad names, duplicates and bad bounds") {
  Registry r;
  r.AddCounter("ok:name_1", "");
  CHECK_THROWS_AS(r.AddCounter("ok:name_1", ""), m3::Error);        // twice
  CHECK_THROWS_AS(r.AddGauge("ok:name_1", ""), m3::Error);          // twice, another type
  CHECK_THROWS_AS(r.AddCounter("1abc", ""), m3::Error);             // leading digit
  CHECK_THROWS_AS(r.AddCounter("a-b", ""), m3::Error);              // dash
  CHECK_THROWS_AS(r.AddCounter("", ""), m3::Error);                 // empty
  CHECK_THROWS_AS(r.AddGaugeFamily("g1", "", {"a:b"}), m3::Error);  // colon in a label
  CHECK_THROWS_AS(r.AddGaugeFamily("g2", "", {"__x"}), m3::Error);  // reserved
  CHECK_THROWS_AS(r.AddGaugeFamily("g3", "", {"a", "a"}), m3::Error);
  CHECK_THROWS_AS(r.AddHistogramFamily("h1", "", {"le"}, {1}), m3::Error);
  CHECK_THROWS_AS(r.AddHistogram("h2", "", {}), m3::Error);
  CHECK_THROWS_AS(r.AddHistogram("h3", "", {1, 1}), m3::Error);
  CHECK_THROWS_AS(r.AddHistogram("h4", "", {2, 1}), m3::Error);
  CHECK_THROWS_AS(r.AddHistogram("h5", "", {1, std::numeric_limits<double>::infinity()}),
                  m3::Error);
  r.AddGaugeFamily("le", "", {"le"});  // le is only reserved on histograms
  Counter& c = r.AddCounter("c", "");
  CHECK_THROWS_AS(c.Inc(-1), m3::Error);
  CHECK_THROWS_AS(c.Inc(std::nan("")), m3::Error);
  CHECK(c.value() == 0);
}

TEST_CASE("scrape hooks run before each render") {
  Registry r;
  Gauge& g = r.AddGauge("outstanding", "Outstanding requests.");
  int scrapes = 0;
  r.AddScrapeHook([&] { g.Set(++scrapes * 10); });
  CHECK(r.Render().find("outstanding 10\n") != std::string::npos);
  CHECK(r.Render().find("outstanding 20\n") != std::string::npos);
}

TEST_CASE("concurrent updates are all counted") {
  Registry r;
  Counter& c = r.AddCounter("c_total", "");
  Gauge& g = r.AddGauge("g", "");
  HistogramFamily& hf = r.AddHistogramFamily("h", "", {"t"}, {0.5});
  constexpr int kThreads = 4, kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Histogram& h = hf.WithLabels({t % 2 == 0 ? "even" : "odd"});
      for (int i = 0; i < kEach; ++i) {
        c.Inc();
        g.Inc();
        h.Observe(i % 2 == 0 ? 0.25 : 1.0);
        if (i % 1000 == 0) (void)r.Render();  // scrapes race with updates
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(c.value() == kThreads * kEach);
  CHECK(g.value() == kThreads * kEach);
  for (const char* t : {"even", "odd"}) {
    const Histogram::Snapshot s = hf.WithLabels({t}).Read();
    CHECK(s.count == 2 * kEach);
    CHECK(s.cumulative[0] == kEach);
    CHECK(s.sum == doctest::Approx(2 * kEach / 2 * 1.25));
  }
}
