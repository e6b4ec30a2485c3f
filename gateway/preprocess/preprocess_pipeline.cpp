// Staging of preprocessing requests over the shared fetch context and the worker pool (see
// preprocess_pipeline.h). A request is admitted by reserving one slot in the worker pool's
// queue, held from admission until it ends, so the queue limit bounds the requests in flight
// (fetching or decoding) as it did when each fetching request held a fetch thread; its items'
// jobs then go to the pool without the limit (at most PreprocessLimits::max_items of them).
#include "gateway/preprocess/preprocess_pipeline.h"

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "gateway/net/api_error.h"
#include "gateway/net/url.h"
#include "shared/error.h"

namespace m3::preprocess {
namespace {

using Clock = PreprocessService::Clock;

struct Job {
  std::shared_ptr<const PreprocessService> service;
  std::shared_ptr<net::WorkerPool> workers;
  PreprocessRequest request;
  Clock::time_point deadline;
  std::shared_ptr<net::SharedByteBudget> bytes;
  net::MemoryBudget::Reservation held;
  RequestCharges charges{&held};
  PreprocessFinish finish;
  std::atomic<bool> slot_held{false};

  std::mutex mu;  // guards what follows
  bool ended = false;
  size_t pending = 0;
  std::vector<media::PreprocessedMedia> items;  // request order
};

std::exception_ptr QueueFull() {
  return std::make_exception_ptr(
      Error(ErrorCode::kResourceExhausted, "the preprocessing queue is full; retry later"));
}

bool Ended(Job& job) {
  std::lock_guard lock(job.mu);
  return job.ended;
}

// Ends the request with `error` unless it has ended already; the reservation goes with it
// (items still in flight find the request ended and drop their bytes).
void LeaveQueue(Job& job) {
  if (job.slot_held.exchange(false)) job.workers->ReleaseSlot();
}

void Fail(Job& job, std::exception_ptr error) {
  {
    std::lock_guard lock(job.mu);
    if (job.ended) return;
    job.ended = true;
  }
  job.finish(nullptr, error);
  LeaveQueue(job);
  std::lock_guard lock(job.charges.mu);
  job.held.Reset();
}

void Complete(Job& job) {
  PreprocessResult result;
  std::exception_ptr error;
  try {
    result = GatherResults(std::move(job.items));
  } catch (...) {
    error = std::current_exception();
  }
  job.finish(error ? nullptr : &result, error);
  LeaveQueue(job);
}

void Queue(const std::shared_ptr<Job>& job, std::function<void()> work) {
  if (!job->workers->Submit(std::move(work))) Fail(*job, QueueFull());
}

// Decodes item `i` from its bytes; the last item to finish gathers the result.
void Decode(Job& job, size_t i, net::FetchedMedia fetched) {
  if (Ended(job)) return;
  const content::MediaRef& ref = job.request.items[i];
  media::PreprocessedMedia item;
  try {
    job.service->ChargeFetched(job.charges, static_cast<int64_t>(fetched.bytes.size()));
    item = job.service->ProcessItem(ref, job.request.options, fetched.bytes, job.charges);
  } catch (...) {
    return Fail(job, net::NameParam(std::current_exception(), ref.param));
  }
  {
    std::lock_guard lock(job.mu);
    if (job.ended) return;
    job.items[i] = std::move(item);
    if (--job.pending > 0) return;
    job.ended = true;
  }
  Complete(job);
}

// Item `i` without the network (inline bytes, data: URI, local file), on a worker.
void ReadAndDecode(Job& job, size_t i) {
  if (Ended(job)) return;
  content::MediaRef& ref = job.request.items[i];
  net::FetchedMedia fetched;
  try {
    if (Clock::now() >= job.deadline) {
      throw Error(ErrorCode::kDeadlineExceeded,
                  "the request's time limit of " +
                      std::to_string(job.service->limits().request_timeout.count()) +
                      " ms for fetching media ran out before this item");
    }
    const net::MediaFetcher& fetcher = job.service->fetcher();
    net::ByteBudget local(job.bytes->remaining());
    fetched = ref.bytes ? fetcher.FromBytes(std::move(*ref.bytes), ref.kind, &local, ref.param)
                        : fetcher.Fetch(ref.url, ref.kind, &local, job.deadline);
    job.bytes->Charge(static_cast<int64_t>(fetched.bytes.size()),
                      fetched.source + " (" + std::to_string(fetched.bytes.size()) + " bytes)");
    if (ref.bytes) std::string().swap(*ref.bytes);
    if (net::UrlScheme(ref.url) == "data") std::string().swap(ref.url);  // decoded: drop the text
  } catch (...) {
    return Fail(job, net::NameParam(std::current_exception(), ref.param));
  }
  Decode(job, i, std::move(fetched));
}

}  // namespace

void StartPreprocess(std::shared_ptr<const PreprocessService> service, const PreprocessPools& pools,
                     PreprocessRequest request, PreprocessFinish finish) {
  if (!pools.workers->TryReserveSlot()) return finish(nullptr, QueueFull());
  auto job = std::make_shared<Job>();
  job->slot_held = true;
  job->service = service;
  job->workers = pools.workers;
  job->request = std::move(request);
  job->held = service->OpenReservation();
  job->deadline = Clock::now() + service->limits().request_timeout;
  job->bytes =
      std::make_shared<net::SharedByteBudget>(service->fetcher().options().max_request_bytes);
  job->finish = std::move(finish);
  const size_t n = job->request.items.size();
  job->items.resize(n);
  job->pending = n;
  if (n == 0) {
    return Queue(job, [job] {
      {
        std::lock_guard lock(job->mu);
        job->ended = true;
      }
      Complete(*job);
    });
  }
  for (size_t i = 0; i < n && !Ended(*job); ++i) {
    const content::MediaRef& ref = job->request.items[i];
    if (ref.bytes || !net::MediaFetcher::IsRemote(ref.url)) {
      Queue(job, [job, i] { ReadAndDecode(*job, i); });
      continue;
    }
    service->fetcher().FetchAsync(
        ref.url, ref.kind, job->bytes, job->deadline,
        [job, i](std::exception_ptr error, net::FetchedMedia fetched) {
          if (error) return Fail(*job, net::NameParam(error, job->request.items[i].param));
          if (Ended(*job)) return;
          auto media = std::make_shared<net::FetchedMedia>(std::move(fetched));
          Queue(job, [job, i, media] { Decode(*job, i, std::move(*media)); });
        });
  }
}

}  // namespace m3::preprocess
