# Sourced by the multi-GPU device scripts: nccl_dir prints the directory holding libnccl.so.2 on
# the GPU machine (PyTorch's nvidia-nccl wheel, else the first one found under /usr/local, /usr/lib
# or /opt), for LD_LIBRARY_PATH: the binaries are built against the toolkit's header only.
nccl_dir() {
  local d
  d="$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null)"
  [ -f "$d/libnccl.so.2" ] || d="$(dirname "$(find /usr/local /usr/lib /opt -name libnccl.so.2 2>/dev/null | head -1)")"
  echo "$d"
}
