// The Prometheus metrics registry and its text rendering (see metrics.h).
#include "gateway/net/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <type_traits>
#include <variant>

#include "shared/error.h"

namespace m3::net {

namespace {

bool IsNameChar(char c, bool first, bool allow_colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (allow_colon && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

bool IsValidName(std::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i], i == 0, allow_colon)) return false;
  }
  return true;
}

template <typename Metric>
std::unique_ptr<Metric> MakeMetric(const std::vector<double>& bounds) {
  if constexpr (std::is_same_v<Metric, Histogram>) {
    return std::make_unique<Histogram>(bounds);
  } else {
    (void)bounds;
    return std::make_unique<Metric>();
  }
}

// `{a="x",b="y"` plus `extra` (already formatted, e.g. `le="0.5"`), closed; empty when there
// is nothing to write.
std::string LabelText(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      const std::string& extra = {}) {
  if (names.empty() && extra.empty()) return {};
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    out += EscapeLabelValue(values[i]);
    out += '"';
  }
  if (!extra.empty()) {
    if (!names.empty()) out += ',';
    out += extra;
  }
  out += '}';
  return out;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, r.ptr);
}

void Counter::Inc(double amount) {
  // Not Require: its message would be built on every call of this hot path.
  if (!(amount >= 0)) {
    throw Error(ErrorCode::kInvalidArgument,
                "a counter cannot go down (increment " + FormatMetricValue(amount) + ")");
  }
  value_.fetch_add(amount, std::memory_order_relaxed);
}

Histogram::Histogram(std::span<const double> bounds)
    : bounds_(bounds.begin(), bounds.end()),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds.size() + 1)) {}

void Histogram::Observe(double value) {
  const size_t i =
      std::isnan(value)
          ? bounds_.size()
          : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = total;
  }
  s.count = total;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  Require(start > 0 && factor > 1 && count >= 1 && std::isfinite(start) && std::isfinite(factor),
          ErrorCode::kInvalidArgument,
          "exponential buckets need start > 0, factor > 1 and count >= 1");
  std::vector<double> out;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) out.push_back(b);
  return out;
}

std::vector<double> LinearBuckets(double start, double width, int count) {
  Require(width > 0 && count >= 1 && std::isfinite(start) && std::isfinite(width),
          ErrorCode::kInvalidArgument, "linear buckets need width > 0 and count >= 1");
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(start + width * i);
  return out;
}

template <typename Metric>
Metric& Family<Metric>::WithLabels(const std::vector<std::string>& values) {
  if (values.size() != label_names_.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                "metric " + name_ + " has " + std::to_string(label_names_.size()) +
                    " labels, given " + std::to_string(values.size()) + " values");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = series_.find(values);
  if (it == series_.end()) it = series_.emplace(values, MakeMetric<Metric>(bounds_)).first;
  return *it->second;
}

template <typename Metric>
void Family<Metric>::ForEach(
    const std::function<void(const std::vector<std::string>&, const Metric&)>& f) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [values, metric] : series_) f(values, *metric);
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

struct Registry::Entry {
  std::string name;
  std::string help;
  std::variant<std::unique_ptr<CounterFamily>, std::unique_ptr<GaugeFamily>,
               std::unique_ptr<HistogramFamily>>
      family;
};

Registry::Registry() = default;
Registry::~Registry() = default;

void Registry::CheckNewName(const std::string& name, const std::vector<std::string>& label_names,
                            bool histogram) const {
  Require(IsValidName(name, true), ErrorCode::kInvalidArgument,
          "invalid metric name \"" + name + "\"");
  for (const auto& e : entries_) {
    Require(e->name != name, ErrorCode::kInvalidArgument,
            "metric " + name + " is registered twice");
  }
  std::set<std::string> seen;
  for (const std::string& l : label_names) {
    Require(IsValidName(l, false) && l.rfind("__", 0) != 0, ErrorCode::kInvalidArgument,
            "metric " + name + ": invalid label name \"" + l + "\"");
    Require(!(histogram && l == "le"), ErrorCode::kInvalidArgument,
            "metric " + name + ": a histogram cannot have a label named le");
    Require(seen.insert(l).second, ErrorCode::kInvalidArgument,
            "metric " + name + ": label " + l + " given twice");
  }
}

CounterFamily& Registry::AddCounterFamily(const std::string& name, const std::string& help,
                                          std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNewName(name, label_names, false);
  auto family = std::unique_ptr<CounterFamily>(new CounterFamily(name, std::move(label_names), {}));
  CounterFamily& ref = *family;
  entries_.push_back(std::make_unique<Entry>(Entry{name, help, std::move(family)}));
  return ref;
}

GaugeFamily& Registry::AddGaugeFamily(const std::string& name, const std::string& help,
                                      std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNewName(name, label_names, false);
  auto family = std::unique_ptr<GaugeFamily>(new GaugeFamily(name, std::move(label_names), {}));
  GaugeFamily& ref = *family;
  entries_.push_back(std::make_unique<Entry>(Entry{name, help, std::move(family)}));
  return ref;
}

HistogramFamily& Registry::AddHistogramFamily(const std::string& name, const std::string& help,
                                              std::vector<std::string> label_names,
                                              std::vector<double> bounds) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNewName(name, label_names, true);
  Require(!bounds.empty(), ErrorCode::kInvalidArgument,
          "histogram " + name + " needs at least one bucket bound");
  for (size_t i = 0; i < bounds.size(); ++i) {
    Require(std::isfinite(bounds[i]), ErrorCode::kInvalidArgument,
            "histogram " + name + ": bucket bounds must be finite (+Inf is implicit)");
    Require(i == 0 || bounds[i] > bounds[i - 1], ErrorCode::kInvalidArgument,
            "histogram " + name + ": bucket bounds must be strictly increasing");
  }
  auto family = std::unique_ptr<HistogramFamily>(
      new HistogramFamily(name, std::move(label_names), std::move(bounds)));
  HistogramFamily& ref = *family;
  entries_.push_back(std::make_unique<Entry>(Entry{name, help, std::move(family)}));
  return ref;
}

Counter& Registry::AddCounter(const std::string& name, const std::string& help) {
  return AddCounterFamily(name, help, {}).WithLabels({});
}

Gauge& Registry::AddGauge(const std::string& name, const std::string& help) {
  return AddGaugeFamily(name, help, {}).WithLabels({});
}

Histogram& Registry::AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<double> bounds) {
  return AddHistogramFamily(name, help, {}, std::move(bounds)).WithLabels({});
}

void Registry::AddScrapeHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  hooks_.push_back(std::move(hook));
}

std::string Registry::Render() const {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hooks = hooks_;
  }
  for (const auto& hook : hooks) hook();

  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& e : entries_) {
    const char* type = e->family.index() == 0   ? "counter"
                       : e->family.index() == 1 ? "gauge"
                                                : "histogram";
    out += "# HELP " + e->name + " " + EscapeHelp(e->help) + "\n";
    out += "# TYPE " + e->name + " " + type + "\n";
    const std::string& name = e->name;
    if (auto* f = std::get_if<std::unique_ptr<CounterFamily>>(&e->family)) {
      const auto& names = (*f)->label_names();
      (*f)->ForEach([&](const std::vector<std::string>& values, const Counter& c) {
        out += name + LabelText(names, values) + " " + FormatMetricValue(c.value()) + "\n";
      });
    } else if (auto* g = std::get_if<std::unique_ptr<GaugeFamily>>(&e->family)) {
      const auto& names = (*g)->label_names();
      (*g)->ForEach([&](const std::vector<std::string>& values, const Gauge& v) {
        out += name + LabelText(names, values) + " " + FormatMetricValue(v.value()) + "\n";
      });
    } else if (auto* h = std::get_if<std::unique_ptr<HistogramFamily>>(&e->family)) {
      const auto& names = (*h)->label_names();
      (*h)->ForEach([&](const std::vector<std::string>& values, const Histogram& hist) {
        const Histogram::Snapshot s = hist.Read();
        const auto bounds = hist.bounds();
        for (size_t i = 0; i <= bounds.size(); ++i) {
          const std::string le =
              "le=\"" + (i < bounds.size() ? FormatMetricValue(bounds[i]) : "+Inf") + "\"";
          out += name + "_bucket" + LabelText(names, values, le) + " " +
                 std::to_string(s.cumulative[i]) + "\n";
        }
        out += name + "_sum" + LabelText(names, values) + " " + FormatMetricValue(s.sum) + "\n";
        out += name + "_count" + LabelText(names, values) + " " + std::to_string(s.count) + "\n";
      });
    }
  }
  return out;
}

}  // namespace m3::net
