// Staging of preprocessing requests over the fetch and worker pools (see preprocess_pipeline.h).
#include "gateway/net/preprocess_pipeline.h"

#include <utility>
#include <vector>

#include "shared/error.h"

namespace m3::net {
namespace {

struct Job {
  PreprocessRequest request;
  std::vector<FetchedMedia> fetched;
  MemoryBudget::Reservation held;
  PreprocessService::Clock::time_point deadline;
  PreprocessFinish finish;
};

std::exception_ptr QueueFull() {
  return std::make_exception_ptr(
      Error(ErrorCode::kResourceExhausted, "the preprocessing queue is full; retry later"));
}

void Process(const PreprocessService& service, Job& job) {
  PreprocessResult result;
  try {
    result = service.Process(job.request, std::move(job.fetched), &job.held);
  } catch (...) {
    return job.finish(nullptr, std::current_exception());
  }
  job.finish(&result, nullptr);
}

bool Fetch(const PreprocessService& service, Job& job) {
  try {
    job.fetched = service.FetchAll(job.request, job.deadline, &job.held);
    return true;
  } catch (...) {
    job.finish(nullptr, std::current_exception());
    return false;
  }
}

}  // namespace

void StartPreprocess(std::shared_ptr<const PreprocessService> service, const PreprocessPools& pools,
                     PreprocessRequest request, PreprocessFinish finish) {
  auto job = std::make_shared<Job>();
  job->request = std::move(request);
  job->held = service->OpenReservation();
  job->deadline = PreprocessService::Clock::now() + service->limits().request_timeout;
  job->finish = std::move(finish);
  if (!PreprocessService::NeedsNetwork(job->request)) {
    if (!pools.workers->TrySubmit([service, job] {
          if (Fetch(*service, *job)) Process(*service, *job);
        })) {
      job->finish(nullptr, QueueFull());
    }
    return;
  }
  std::shared_ptr<WorkerPool> workers = pools.workers;
  if (!pools.fetch->TrySubmit([service, workers, job] {
        if (!Fetch(*service, *job)) return;
        if (!workers->TrySubmit([service, job] { Process(*service, *job); })) {
          job->finish(nullptr, QueueFull());
        }
      })) {
    job->finish(nullptr, QueueFull());
  }
}

}  // namespace m3::net
