#!/usr/bin/env bash
# Prints the directory holding libnccl.so.2 on the GPU machine (PyTorch's nvidia-nccl wheel, or
# a CUDA / system install), for LD_LIBRARY_PATH: the engine loads NCCL at run time.
nccl="$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null)"
[ -f "$nccl/libnccl.so.2" ] || nccl="$(dirname "$(find /usr/local /usr/lib /opt -name libnccl.so.2 2>/dev/null | head -1)")"
echo "$nccl"
