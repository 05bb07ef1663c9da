"""Minimal HTTP/1.1 client with exact control over the request bytes.

``requests`` and ``urllib`` add headers of their own (``Accept-Encoding: gzip,
deflate``, ``Connection``, ``User-Agent``...) that change Triton's answers, so the
differential tests use this instead.  Only ``Host`` is added (as HTTP/1.1
requires), and ``Content-Length`` when asked for.
"""

import gzip
import http.client
import zlib
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class Response:
    status: int
    headers: list = field(default_factory=list)  # [(name, value)] as received
    body: bytes = b""

    def header(self, name):
        """Value of the first header called name (case-insensitive), or None."""
        lname = name.lower()
        for key, value in self.headers:
            if key.lower() == lname:
                return value
        return None

    def header_all(self, name):
        lname = name.lower()
        return [value for key, value in self.headers if key.lower() == lname]

    @property
    def content_type(self):
        return self.header("Content-Type")

    @property
    def ihcl(self):
        return self.header("Inference-Header-Content-Length")

    def decoded_body(self):
        """Body with any Content-Encoding undone."""
        encoding = self.header("Content-Encoding")
        if encoding == "gzip":
            return gzip.decompress(self.body)
        if encoding == "deflate":
            return zlib.decompress(self.body)
        return self.body

    def split(self):
        """(json_header_bytes, binary_tail) of the decoded body, per IHCL."""
        body = self.decoded_body()
        if self.ihcl is None:
            return body, b""
        n = int(self.ihcl)
        return body[:n], body[n:]


def send(base_url, method, path, body=b"", headers=(), content_length=None, chunks=None,
         timeout=60.0):
    """Send one request on a fresh connection and return the Response.

    headers: sequence of (name, value) sent verbatim and in order.
    content_length: True/False to force sending ``Content-Length: len(body)``;
      None = send it when the body is non-empty or the method is POST.
    chunks: list of byte strings -> ``Transfer-Encoding: chunked`` upload
      (the caller adds that header).
    """
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for name, value in headers:
            conn.putheader(name, value)
        if chunks is None:
            if content_length is None:
                content_length = bool(body) or method == "POST"
            if content_length:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body if body else None)
        else:
            conn.endheaders(iter(chunks), encode_chunked=True)
        resp = conn.getresponse()
        data = resp.read()
        return Response(resp.status, list(resp.getheaders()), data)
    finally:
        conn.close()
