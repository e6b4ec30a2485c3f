// A small random MiniMax-M3 checkpoint with the released model's head shapes (16 query / 4 KV
// heads of 128, index 4 x 128, MSA block 128, top-16): 2 layers (full attention + dense MLP,
// then MSA + MoE of 8 experts), hidden 512, vocabulary 1024, 8192 positions. The GPU tests that
// need the tensor-core attention and the indexer's fast kernels (which the goldens' small
// shapes do not reach) run on it.
#pragma once

#include <string>

namespace m3::test {

// Its model directory, written by m3-make-random-checkpoint on first use in this process.
const std::string& RealHeadCheckpoint();

}  // namespace m3::test
