// CudaStepGraph: an instantiated cudaGraphExec_t replayed on the stream it was captured on.
#include "engine/backend/cuda/cuda_graph.h"

#include <exception>
#include <string>

#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::backend {
namespace {

class CudaStepGraph : public StepGraph {
 public:
  CudaStepGraph(cudaStream_t stream, cudaGraphExec_t exec, int64_t nodes)
      : stream_(stream), exec_(exec), nodes_(nodes) {}
  ~CudaStepGraph() override { cudaGraphExecDestroy(exec_); }
  void Replay() override {
    const cudaError_t e = cudaGraphLaunch(exec_, stream_);
    if (e != cudaSuccess)
      throw Error(ErrorCode::kInternal,
                  std::string("cuda backend: graph replay: ") + cudaGetErrorString(e));
  }
  int64_t operations() const override { return nodes_; }

 private:
  cudaStream_t stream_;
  cudaGraphExec_t exec_;
  int64_t nodes_;
};

}  // namespace

std::unique_ptr<StepGraph> CaptureCudaGraph(cudaStream_t stream, const std::function<void()>& ops) {
  cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    cudaGetLastError();
    Log(LogLevel::kWarn, "cuda graphs: cannot begin a capture: ", cudaGetErrorString(e));
    return nullptr;
  }
  cudaGraph_t graph = nullptr;
  try {
    ops();
  } catch (const std::exception& what) {
    // End the capture before anything propagates so the stream is usable again. An op that
    // cannot be captured (it waits for the host) invalidates the capture and fails: that shape
    // runs eagerly; any other error is the ops' own and propagates.
    e = cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    if (e == cudaSuccess) throw;
    Log(LogLevel::kWarn, "cuda graphs: capture failed (", what.what(),
        "); this step shape runs eagerly");
    return nullptr;
  }
  e = cudaStreamEndCapture(stream, &graph);
  if (e != cudaSuccess || !graph) {
    cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    Log(LogLevel::kWarn, "cuda graphs: capture failed (", cudaGetErrorString(e),
        "); this step shape runs eagerly");
    return nullptr;
  }
  size_t nodes = 0;
  if (cudaGraphGetNodes(graph, nullptr, &nodes) != cudaSuccess) {
    cudaGetLastError();
    nodes = 0;
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    cudaGetLastError();
    Log(LogLevel::kWarn, "cuda graphs: instantiation failed (", cudaGetErrorString(e),
        "); this step shape runs eagerly");
    return nullptr;
  }
  return std::make_unique<CudaStepGraph>(stream, exec, static_cast<int64_t>(nodes));
}

}  // namespace m3::engine::backend
