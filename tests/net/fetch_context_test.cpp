// The shared fetch context: many concurrent fetches run on its fixed threads (counted in
// /proc/self/task), DNS lookups go through the bounded resolver (a stalled lookup takes no
// thread and fails by its deadline), the in-flight cap and a request's shared byte budget
// hold with fetches running at once, and the context may be released from its own thread.
#include <dirent.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gateway/net/fetch_context.h"
#include "gateway/net/media_fetcher.h"
#include "shared/error.h"
#include "tests/test_util.h"

namespace {

using m3::ErrorCode;
using m3::content::MediaKind;
using m3::net::FetchContext;
using m3::net::FetchedMedia;
using m3::net::FetchOptions;
using m3::net::MediaFetcher;
using Clock = std::chrono::steady_clock;

const std::string& Png() {
  static std::string png = m3::test::ReadFile(m3::test::DataPath("m3-tiny/images/img00_53x37.png"));
  return png;
}

int Threads() {
  int n = 0;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n;
}

// The thread count once threads that earlier tests let go have exited.
int SettledThreads() {
  int last = Threads();
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int now = Threads();
    if (now == last) return now;
    last = now;
  }
  return last;
}

// An HTTP origin on one thread (so it adds no thread per connection to the counts): each
// request is answered `delay_ms` after its head arrived with `body`, then the connection
// closes.
class PollOrigin {
 public:
  PollOrigin(std::string body, int delay_ms, bool send_length = true)
      : body_(std::move(body)), delay_(delay_ms), send_length_(send_length) {
    if (::pipe2(stop_, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 256) != 0) {
      throw std::runtime_error("cannot listen on loopback");
    }
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~PollOrigin() {
    char c = 1;
    (void)!::write(stop_[1], &c, 1);
    thread_.join();
    for (auto& c : conns_) ::close(c.fd);
    ::close(listen_fd_);
    ::close(stop_[0]);
    ::close(stop_[1]);
  }
  uint16_t port() const { return port_; }
  std::string Url(const std::string& host, const std::string& path) const {
    return "http://" + host + ":" + std::to_string(port_) + path;
  }
  int served() const { return served_.load(); }

 private:
  struct Conn {
    int fd;
    std::string head;
    Clock::time_point due{};
    bool ready = false;
  };

  void Loop() {
    for (;;) {
      std::vector<pollfd> fds = {{stop_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      int timeout = 1000;
      for (const auto& c : conns_) {
        fds.push_back({c.fd, static_cast<short>(c.ready ? 0 : POLLIN), 0});
        if (c.ready) {
          auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(c.due - Clock::now());
          timeout = std::min<int>(timeout, std::max<int>(static_cast<int>(ms.count()), 0));
        }
      }
      ::poll(fds.data(), fds.size(), timeout);
      if (fds[0].revents & POLLIN) return;
      if (fds[1].revents & POLLIN) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) conns_.push_back({fd, {}});
      }
      for (size_t i = 0; i < conns_.size(); ++i) {
        Conn& c = conns_[i];
        const short revents = i + 2 < fds.size() && fds[i + 2].fd == c.fd ? fds[i + 2].revents : 0;
        if (!c.ready && (revents & (POLLIN | POLLHUP | POLLERR))) {
          char buf[4096];
          const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
          if (n <= 0) {
            c.due = Clock::now();
            c.ready = true;
            c.head.clear();  // the client left: close without answering
          } else {
            c.head.append(buf, static_cast<size_t>(n));
            if (c.head.find("\r\n\r\n") != std::string::npos) {
              c.due = Clock::now() + std::chrono::milliseconds(delay_);
              c.ready = true;
            }
          }
        }
      }
      const auto now = Clock::now();
      for (size_t i = 0; i < conns_.size();) {
        Conn& c = conns_[i];
        if (!c.ready || c.due > now) {
          ++i;
          continue;
        }
        if (!c.head.empty()) {
          ++served_;
          std::string reply = "HTTP/1.1 200 OK\r\n";
          if (send_length_) reply += "Content-Length: " + std::to_string(body_.size()) + "\r\n";
          reply += "Connection: close\r\n\r\n" + body_;
          size_t sent = 0;
          while (sent < reply.size()) {
            const ssize_t n = ::send(c.fd, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) break;
            sent += static_cast<size_t>(n);
          }
        }
        ::shutdown(c.fd, SHUT_RDWR);
        ::close(c.fd);
        conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }

  std::string body_;
  int delay_;
  bool send_length_;
  int listen_fd_ = -1;
  int stop_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::vector<Conn> conns_;  // the origin thread's only
  std::atomic<int> served_{0};
  std::thread thread_;
};

// What a batch of asynchronous fetches came to.
struct Outcomes {
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<ErrorCode> errors;
  std::vector<std::string> messages;
  std::vector<FetchedMedia> media;

  MediaFetcher::FetchDone Collect() {
    return [this](std::exception_ptr error, FetchedMedia m) {
      std::lock_guard lock(mu);
      if (error) {
        try {
          std::rethrow_exception(error);
        } catch (const m3::Error& e) {
          errors.push_back(e.code());
          messages.push_back(e.what());
        } catch (...) {
          errors.push_back(ErrorCode::kInternal);
          messages.push_back("not an m3::Error");
        }
      } else {
        media.push_back(std::move(m));
      }
      ++done;
      cv.notify_all();
    };
  }
  // Waits (bounded) for `n` completions, sampling the peak thread count meanwhile.
  bool WaitFor(int n, int* peak_threads = nullptr) {
    const auto until = Clock::now() + std::chrono::seconds(20);
    std::unique_lock lock(mu);
    while (done < n && Clock::now() < until) {
      if (peak_threads) *peak_threads = std::max(*peak_threads, Threads());
      cv.wait_for(lock, std::chrono::milliseconds(10));
    }
    return done >= n;
  }
};

FetchOptions Allowing(const std::string& host, uint16_t port) {
  FetchOptions o;
  o.allowed_hosts = {host + ":" + std::to_string(port)};
  o.total_timeout = std::chrono::milliseconds(10000);
  o.network_threads = 2;
  o.resolver_threads = 2;
  return o;
}

}  // namespace

TEST_CASE("many concurrent fetches run on the context's fixed threads") {
  PollOrigin origin(Png(), 300);
  FetchContext::Options options;
  options.threads = 2;
  options.resolver.threads = 2;
  // A name that only this resolver knows, so every fetch goes through a DNS lookup.
  options.resolver.lookup = [](const std::string& host, uint16_t port) {
    if (host != "origin.test") throw m3::Error(ErrorCode::kUnavailable, "unknown host " + host);
    return m3::net::HostResolver::Endpoints{{boost::asio::ip::make_address("127.0.0.1"), port}};
  };
  const int before = SettledThreads();
  auto context = std::make_shared<FetchContext>(options);
  const int with_context = Threads();
  CHECK(with_context <= before + 4);
  MediaFetcher fetcher(Allowing("origin.test", origin.port()), context);
  CHECK(Threads() == with_context);  // a fetcher given a context starts no thread

  constexpr int kFetches = 40;
  Outcomes out;
  for (int i = 0; i < kFetches; ++i) {
    fetcher.FetchAsync(origin.Url("origin.test", "/a" + std::to_string(i) + ".png"),
                       MediaKind::kImage, nullptr, std::nullopt, out.Collect());
  }
  int peak = Threads();
  REQUIRE(out.WaitFor(kFetches, &peak));
  CHECK(out.errors.empty());
  CHECK(out.media.size() == kFetches);
  for (const auto& m : out.media) CHECK(m.bytes == Png());
  CHECK(origin.served() == kFetches);
  // 40 fetches in flight at once, each with its own DNS lookup: no thread more.
  CHECK(peak <= with_context);
  MESSAGE("threads: " << before << " before the context, " << with_context << " with it, peak "
                      << peak << " during " << kFetches << " concurrent fetches");
}

TEST_CASE("the blocking Fetch runs on the shared context too") {
  PollOrigin origin(Png(), 0);
  const int before = SettledThreads();
  MediaFetcher fetcher(Allowing("127.0.0.1", origin.port()));  // its own context
  const int with_fetcher = Threads();
  CHECK(with_fetcher <= before + 4);  // 2 network + 2 DNS threads
  std::vector<std::thread> callers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&] {
      if (fetcher.Fetch(origin.Url("127.0.0.1", "/x.png"), MediaKind::kImage, nullptr).bytes ==
          Png()) {
        ++ok;
      }
    });
  }
  for (auto& t : callers) t.join();
  CHECK(ok == 8);
  CHECK(Threads() == with_fetcher);
}

TEST_CASE("a stalled DNS lookup takes no thread and fails by its deadline") {
  PollOrigin origin(Png(), 0);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> stalled{0};
  FetchContext::Options options;
  options.threads = 1;
  options.resolver.threads = 2;
  options.resolver.queue_limit = 3;
  options.resolver.lookup = [&](const std::string& host, uint16_t port) {
    if (host == "stall.test") {
      ++stalled;
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::seconds(20), [&] { return release; });
      throw m3::Error(ErrorCode::kUnavailable, "stall.test never resolved");
    }
    return m3::net::HostResolver::Endpoints{{boost::asio::ip::make_address("127.0.0.1"), port}};
  };
  auto context = std::make_shared<FetchContext>(options);
  const int before = SettledThreads();
  FetchOptions o = Allowing("origin.test", origin.port());
  o.allowed_hosts.push_back("stall.test");
  o.total_timeout = std::chrono::milliseconds(400);
  MediaFetcher fetcher(o, context);

  constexpr int kLookups = 10;
  Outcomes out;
  const auto start = Clock::now();
  for (int i = 0; i < kLookups; ++i) {
    fetcher.FetchAsync("http://stall.test/x" + std::to_string(i) + ".png", MediaKind::kImage,
                       nullptr, std::nullopt, out.Collect());
  }
  int peak = Threads();
  REQUIRE(out.WaitFor(kLookups, &peak));
  CHECK(Clock::now() - start < std::chrono::seconds(5));  // each waits 400 ms at most
  CHECK(out.media.empty());
  int timed_out = 0;
  for (size_t i = 0; i < out.errors.size(); ++i) {
    CAPTURE(out.messages[i]);
    // Waiting for a worker (or one stuck in getaddrinfo) ends at the deadline; past the
    // queue's room a lookup is refused at once.
    CHECK((out.errors[i] == ErrorCode::kDeadlineExceeded ||
           out.errors[i] == ErrorCode::kResourceExhausted));
    if (out.errors[i] == ErrorCode::kDeadlineExceeded) {
      ++timed_out;
      CHECK(out.messages[i].find("resolving host 'stall.test'") != std::string::npos);
    }
  }
  CHECK(timed_out >= 2);
  CHECK(stalled.load() == 2);  // only the pool's two workers ever entered the stalled lookup
  CHECK(peak <= before);       // no thread per lookup
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  // The workers are back: lookups queued behind them and expired meanwhile were dropped, and
  // new ones resolve.
  auto got = fetcher.Fetch(origin.Url("origin.test", "/ok.png"), MediaKind::kImage, nullptr);
  CHECK(got.bytes == Png());
  CHECK(stalled.load() == 2);
}

TEST_CASE("past the in-flight cap a fetch is refused at once") {
  PollOrigin origin(Png(), 400);
  FetchContext::Options options;
  options.max_inflight = 2;
  auto context = std::make_shared<FetchContext>(options);
  MediaFetcher fetcher(Allowing("127.0.0.1", origin.port()), context);
  Outcomes out;
  for (int i = 0; i < 4; ++i) {
    fetcher.FetchAsync(origin.Url("127.0.0.1", "/x.png"), MediaKind::kImage, nullptr, std::nullopt,
                       out.Collect());
  }
  REQUIRE(out.WaitFor(4));
  CHECK(out.media.size() == 2);
  REQUIRE(out.errors.size() == 2);
  for (size_t i = 0; i < out.errors.size(); ++i) {
    CHECK(out.errors[i] == ErrorCode::kResourceExhausted);
    CHECK(out.messages[i].find("in flight") != std::string::npos);
  }
}

TEST_CASE("a request's byte budget holds across items fetched at once") {
  for (bool send_length : {true, false}) {
    CAPTURE(send_length);
    PollOrigin origin(Png(), 100, send_length);
    MediaFetcher fetcher(Allowing("127.0.0.1", origin.port()));
    // Room for two of the three items.
    auto budget =
        std::make_shared<m3::net::SharedByteBudget>(static_cast<int64_t>(Png().size() * 5 / 2));
    Outcomes out;
    for (int i = 0; i < 3; ++i) {
      fetcher.FetchAsync(origin.Url("127.0.0.1", "/x.png"), MediaKind::kImage, budget, std::nullopt,
                         out.Collect());
    }
    REQUIRE(out.WaitFor(3));
    for (size_t i = 0; i < out.errors.size(); ++i) {
      CAPTURE(out.messages[i]);
      CHECK(out.errors[i] == ErrorCode::kTooLarge);
      CHECK(out.messages[i].find("over its limit") != std::string::npos);
    }
    if (send_length) {
      // Declared lengths are charged whole before any body byte is read: two fit.
      CHECK(out.media.size() == 2);
      CHECK(out.errors.size() == 1);
    } else {
      // Streamed bodies are charged as they arrive, so interleaved ones may all run out.
      CHECK(out.media.size() <= 2);
      CHECK(!out.errors.empty());
    }
    CHECK(budget->remaining() >= 0);
  }
}

TEST_CASE("a fetcher released by its own fetch's completion shuts down cleanly") {
  PollOrigin origin(Png(), 50);
  const int before = SettledThreads();
  auto fetcher = std::make_shared<MediaFetcher>(Allowing("127.0.0.1", origin.port()));
  std::promise<bool> fetched;
  // The completion holds the last reference, so the fetcher and its context go on a network
  // thread of that very context.
  fetcher->FetchAsync(origin.Url("127.0.0.1", "/x.png"), MediaKind::kImage, nullptr, std::nullopt,
                      [keep = fetcher, &fetched](std::exception_ptr error, FetchedMedia m) {
                        fetched.set_value(!error && m.bytes == Png());
                      });
  fetcher.reset();
  auto result = fetched.get_future();
  REQUIRE(result.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(result.get());
  CHECK(SettledThreads() <= before);  // its threads are gone
}
