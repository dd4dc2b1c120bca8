"""A replica that counts the requests it gets (the load tests' server side): every request but
``GET /__stats`` is answered 200 with a short body (headers and body in one write, over HTTP/1.1
keep-alive) and its arrival time noted; ``/slow`` answers after half a second. ``GET /__stats``
returns ``{"count": N, "times": [monotonic arrival times]}``. Run as a service body: it listens
on ``$PORT`` of ``$COUNT_HOST`` (default 127.0.0.1). Standard library only."""

import http.server
import json
import os
import threading
import time

LOCK = threading.Lock()
TIMES = []


class Counter(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self, status, body, content_type="text/plain"):
        head = (f"HTTP/1.1 {status} OK\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.wfile.write(head + body)

    def _count(self):
        now = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path == "/__stats":
            with LOCK:
                stats = {"count": len(TIMES), "times": list(TIMES)}
            self._answer(200, json.dumps(stats).encode(), "application/json")
            return
        with LOCK:
            TIMES.append(now)
        if self.path.startswith("/slow"):
            time.sleep(0.5)
        self._answer(200, b"counted\n")

    do_GET = do_POST = do_PUT = _count

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512


print("counting on", os.environ["PORT"], flush=True)
# Loopback unless told otherwise (a Kubernetes pod is reached on its own address).
Server((os.environ.get("COUNT_HOST", "127.0.0.1"), int(os.environ["PORT"])), Counter).serve_forever()
