"""A minimal OTLP/HTTP trace collector on loopback that decodes the protobuf it receives."""
from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)


class Receiver:
    """A minimal OTLP/HTTP trace collector on 127.0.0.1 (ephemeral port)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict, ExportTraceServiceRequest]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                receiver.posts.append((self.path, dict(self.headers), req))
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # close() waits for serve_forever's next poll: 0.5 s by default
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[tuple[dict, object]]:
        out = []
        for _, _, req in self.posts:
            for rs in req.resource_spans:
                res = attrs(rs.resource)
                for ss in rs.scope_spans:
                    out.extend((res, s) for s in ss.spans)
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind)


def attrs(obj) -> dict:
    return {kv.key: value(kv.value) for kv in obj.attributes}


