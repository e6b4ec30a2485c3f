#!/usr/bin/python3
"""The engine server from Python (Debian python3-grpcio + python3-protobuf), with stubs made at
test time by Debian's protoc and grpc_python_plugin: ModelInfo, the golden greedy tokens
(text, image with BF16 pixels accepted), streaming, abort mid-stream, a cancelled call whose
pages come back (seen through Health), bad input as INVALID_ARGUMENT.

usage: engine_client_test.py M3_ENGINE_BINARY REPO_ROOT"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time


def main():
    binary, root = sys.argv[1], sys.argv[2]
    stubs = tempfile.mkdtemp(prefix="m3-pystubs-")
    subprocess.run(
        ["/usr/bin/protoc", "-I", os.path.join(root, "proto"), "--python_out=" + stubs,
         "--grpc_python_out=" + stubs, "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
         os.path.join(root, "proto/engine.proto"), os.path.join(root, "proto/tensor.proto")],
        check=True)
    sys.path.insert(0, stubs)
    import grpc
    import engine_pb2 as pb
    import engine_pb2_grpc as pbg

    data = os.path.join(root, "tests/data/m3-tiny")
    log = open(os.path.join(stubs, "server.log"), "w")
    server = subprocess.Popen([binary, "serve", "--model", os.path.join(data, "model"), "--port", "0",
                               "--host", "127.0.0.1", "--kv-pages", "128"],
                              stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        line = server.stdout.readline()
        assert "listening on port" in line, line
        port = int(line.rsplit(" ", 1)[1])
        channel = grpc.insecure_channel("127.0.0.1:%d" % port,
                                        options=[("grpc.max_send_message_length", 1 << 30)])
        stub = pbg.EngineStub(channel)
        run(stub, pb, grpc, data)
    finally:
        server.terminate()
        code = server.wait(timeout=60)
        log.close()
        if code != 0:
            sys.stderr.write(open(os.path.join(stubs, "server.log")).read()[-4000:])
        assert code == 0, "server did not exit cleanly: status %d" % code
    print("python client: all checks passed")


class Cases:
    def __init__(self, path):
        self.f = open(path, "rb")
        n = struct.unpack("<Q", self.f.read(8))[0]
        self.h = json.loads(self.f.read(n))
        self.base = 8 + n

    def raw(self, key):
        m = self.h[key]
        self.f.seek(self.base + m["data_offsets"][0])
        return m, self.f.read(m["data_offsets"][1] - m["data_offsets"][0])

    def ints(self, key):
        m, b = self.raw(key)
        assert m["dtype"] == "I64"
        return list(struct.unpack("<%dq" % (len(b) // 8), b))


def request(pb, cases, case, bf16=False):
    req = pb.GenerateRequest(request_id="py-" + case, token_ids=cases.ints(case + ".input_ids"))
    key = case + ".pixel_values"
    if key in cases.h:
        m, b = cases.raw(key)
        g = cases.ints(case + ".image_grid_thw")
        dim, row = m["shape"][1], 0
        for i in range(0, len(g), 3):
            rows = g[i] * g[i + 1] * g[i + 2]
            item = req.media.add(kind=pb.MultimodalItem.KIND_IMAGE, grid_thw=g[i:i + 3])
            chunk = b[row * dim * 4:(row + rows) * dim * 4]
            if bf16:  # truncate each float32 to its top two bytes
                chunk = b"".join(chunk[j + 2:j + 4] for j in range(0, len(chunk), 4))
            item.pixel_values.dtype = "BF16" if bf16 else "F32"
            item.pixel_values.shape.extend([rows, dim])
            item.pixel_values.data = chunk
            row += rows
    req.sampling.temperature = 0
    req.sampling.ignore_eos = True
    req.sampling.max_tokens = len(cases.ints(case + ".greedy_tokens"))
    return req


def wait_pages_free(stub, pb):
    for _ in range(400):
        h = stub.Health(pb.HealthRequest())
        if h.kv_pages_used == 0 and h.running_requests == 0:
            return True
        time.sleep(0.005)
    return False


def run(stub, pb, grpc, data):
    cases = Cases(os.path.join(data, "model_cases.safetensors"))
    info = stub.ModelInfo(pb.ModelInfoRequest())
    assert info.architecture == "minimax_m3_vl" and info.vocab_size == 512, info
    assert "BF16" in info.pixel_dtypes

    for case in ("text", "image"):
        got, last = [], None
        for msg in stub.Generate(request(pb, cases, case)):
            got += msg.token_ids
            last = msg
        assert got == cases.ints(case + ".greedy_tokens"), (case, got)
        assert last.finish_reason == pb.GenerateResponse.FINISH_REASON_LENGTH
        assert last.completion_tokens == len(got)

    got = [t for msg in stub.Generate(request(pb, cases, "image", bf16=True)) for t in msg.token_ids]
    assert len(got) == len(cases.ints("image.greedy_tokens"))

    # Streaming with logprobs (chosen + top 3 per token).
    req = request(pb, cases, "text")
    req.request_id = "py-stream"
    req.sampling.max_tokens = 40
    req.sampling.logprobs = 3
    msgs = list(stub.Generate(req))
    tokens = [t for m in msgs for t in m.token_ids]
    lps = [l for m in msgs for l in m.logprobs]
    assert len(msgs) > 1 and len(tokens) == 40 and len(lps) == 40 * 4
    for i, t in enumerate(tokens):  # greedy: the chosen token is the top one
        assert lps[4 * i].token_id == t and lps[4 * i + 1].token_id == t

    # Abort mid-stream.
    req.request_id = "py-abort"
    req.sampling.max_tokens = 3000
    req.sampling.logprobs = 0
    call = stub.Generate(req)
    n = 0
    for msg in call:
        n += len(msg.token_ids)
        if n >= 5:
            break
    assert stub.Abort(pb.AbortRequest(request_id="py-abort")).found
    finals = [m.finish_reason for m in call]
    assert finals and finals[-1] == pb.GenerateResponse.FINISH_REASON_ABORT, finals
    assert wait_pages_free(stub, pb)

    # A cancelled call (what a client that goes away looks like): pages come back.
    req.request_id = "py-cancel"
    call = stub.Generate(req)
    next(iter(call))
    assert stub.Health(pb.HealthRequest()).kv_pages_used > 0
    call.cancel()
    assert wait_pages_free(stub, pb), "pages not returned after cancel"

    # Bad input.
    bad = request(pb, cases, "image")
    bad.media[0].pixel_values.data = bad.media[0].pixel_values.data[:-4]
    try:
        list(stub.Generate(bad))
        raise AssertionError("short pixel data accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
        assert "bytes" in e.details(), e.details()
    assert stub.Health(pb.HealthRequest()).status == pb.HealthResponse.STATUS_SERVING


if __name__ == "__main__":
    main()
