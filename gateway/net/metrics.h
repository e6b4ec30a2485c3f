// Prometheus metrics: counters, gauges and fixed-bucket histograms, with or without labels, in
// a Registry that renders the text exposition format 0.0.4 for GET /metrics. The hot path
// (Inc, Set, Observe on a metric reference the caller keeps) is a few relaxed atomic operations
// and takes no lock; only looking up a labelled series (WithLabels) and rendering lock a family.
// Names, label names and bucket bounds are checked when a metric is registered; a violation is
// a programming error reported as m3::Error(kInvalidArgument) naming the metric.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace m3::net {

// The Content-Type of Registry::Render's text, for the /metrics response.
inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

class Counter {
 public:
  // Throws m3::Error(kInvalidArgument) for a negative or NaN amount: counters only go up.
  void Inc(double amount = 1);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void Inc() { Add(1); }
  void Dec() { Add(-1); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `bounds`: the finite upper bounds, strictly increasing (checked by the registry); the
  // +Inf bucket is implicit.
  explicit Histogram(std::span<const double> bounds);

  // Counted in the first bucket whose bound is >= value (Prometheus' `le`); NaN goes to +Inf
  // only, as the Prometheus client libraries do.
  void Observe(double value);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  // Count is the +Inf bucket, so the two always agree even while observations race with it.
  Snapshot Read() const;
  std::span<const double> bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0};
};

// Bucket bounds: `count` bounds start, start*factor, ... (start > 0, factor > 1).
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// `count` bounds start, start+width, ... (width > 0).
std::vector<double> LinearBuckets(double start, double width, int count);

// The series of one metric name, one per distinct label value tuple. References returned by
// WithLabels stay valid for the registry's life: keep them for the hot path.
template <typename Metric>
class Family {
 public:
  // Values in the order of the family's label names; throws m3::Error(kInvalidArgument) when
  // their number differs.
  Metric& WithLabels(const std::vector<std::string>& values);

  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

 private:
  friend class Registry;
  Family(std::string name, std::vector<std::string> label_names, std::vector<double> bounds)
      : name_(std::move(name)), label_names_(std::move(label_names)), bounds_(std::move(bounds)) {}
  // Calls `f(values, metric)` for every series in label-value order, under the family's lock.
  void ForEach(const std::function<void(const std::vector<std::string>&, const Metric&)>& f) const;

  std::string name_;
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;  // histograms only
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> series_;
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Each name once per registry. Metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
  // [a-zA-Z_][a-zA-Z0-9_]* (not starting with "__", and no "le" on histograms), distinct.
  CounterFamily& AddCounterFamily(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names);
  GaugeFamily& AddGaugeFamily(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names);
  HistogramFamily& AddHistogramFamily(const std::string& name, const std::string& help,
                                      std::vector<std::string> label_names,
                                      std::vector<double> bounds);
  // Unlabelled metrics: a family with its one series.
  Counter& AddCounter(const std::string& name, const std::string& help);
  Gauge& AddGauge(const std::string& name, const std::string& help);
  Histogram& AddHistogram(const std::string& name, const std::string& help,
                          std::vector<double> bounds);

  // Runs before every Render, outside the registry's lock: for gauges that are read from
  // elsewhere at scrape time (queue depth, per-engine health) rather than kept up to date.
  void AddScrapeHook(std::function<void()> hook);

  // The text exposition format 0.0.4 (Content-Type: text/plain; version=0.0.4): families in
  // registration order, each with HELP and TYPE lines, its series in label-value order.
  std::string Render() const;

 private:
  struct Entry;
  void CheckNewName(const std::string& name, const std::vector<std::string>& label_names,
                    bool histogram) const;

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::function<void()>> hooks_;
};

// The exposition format's escaping: label values escape backslash, double quote and newline;
// HELP text escapes backslash and newline.
std::string EscapeLabelValue(std::string_view value);
std::string EscapeHelp(std::string_view help);
// A sample value as Prometheus writes it: shortest round-trip form, "+Inf", "-Inf", "NaN".
std::string FormatMetricValue(double value);

}  // namespace m3::net
