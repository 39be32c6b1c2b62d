"""Checks that counting_proxy.py forwards S3 requests unchanged, on the bench's moto.

The functions' S3 client sends small in-memory bodies whole, with the checksum in
a header (x-amz-checksum-crc32); a streamed body goes `aws-chunked` with the
checksum in a trailer, and Content-Length (when sent) is the encoded length.
Both must reach moto as sent, with If-Match / If-None-Match and the answer's
ETag unchanged, or the S3 store's counts would be of requests it never made. So
before the per-store table, through the proxy, this writes an object

  1. whole, with If-None-Match: *, then again (412: it exists);
  2. aws-chunked with a trailing CRC32 and Content-Length the encoded length;
  3. aws-chunked inside HTTP Transfer-Encoding: chunked (no Content-Length);
  4. with If-Match: the ETag the proxy passed back (200), and a stale one (412);

and reads each back, HEADs it and DELETEs it (204). Any difference raises.
"""

from __future__ import annotations

import base64
import http.client
import zlib

from runtime_api import HarnessError

AUTH = ("AWS4-HMAC-SHA256 Credential=local/20261201/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=0000")


def _request(url: str, method: str, path: str, headers: dict | None = None, body: bytes | None = None,
             chunked: bool = False) -> tuple[int, dict, bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        headers = {"Authorization": AUTH, "x-amz-date": "20261201T000000Z", **(headers or {})}
        if chunked:
            conn.putrequest(method, path)
            for name, value in headers.items():
                conn.putheader(name, value)
            conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            for start in range(0, len(body), 7):  # several HTTP chunks
                piece = body[start:start + 7]
                conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            conn.send(b"0\r\n\r\n")
        else:
            conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _aws_chunked(data: bytes) -> tuple[bytes, dict]:
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    encoded = (f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n"
               + f"x-amz-checksum-crc32:{crc}\r\n\r\n".encode())
    headers = {"Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data)),
               "x-amz-trailer": "x-amz-checksum-crc32", "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
               "x-amz-sdk-checksum-algorithm": "CRC32"}
    return encoded, headers


def check(proxy_url: str, bucket: str, prefix: str) -> int:
    """Runs the checks through the proxy; returns the number of requests it sent."""
    sent = 0

    def call(method, key, expect_status, **kwargs):
        nonlocal sent
        sent += 1
        status, headers, body = _request(proxy_url, method, f"/{bucket}/{prefix}{key}", **kwargs)
        if status != expect_status:
            raise HarnessError(f"counting proxy check: {method} {key} {kwargs.get('headers')}: "
                               f"status {status}, expected {expect_status}: {body[:300]!r}")
        return headers, body

    def read_back(key: str, data: bytes) -> str:
        headers, body = call("GET", key, 200)
        if body != data or not headers.get("etag"):
            raise HarnessError(f"counting proxy check: {key} read back {body!r} (ETag {headers.get('etag')}), "
                               f"wrote {data!r}")
        head, head_body = call("HEAD", key, 200)
        if head.get("content-length") != str(len(data)) or head_body or head.get("etag") != headers["etag"]:
            raise HarnessError(f"counting proxy check: HEAD {key}: {head}")
        return headers["etag"]

    whole = b'{"format":1,"holders":[]}'
    call("PUT", "whole", 200, headers={"If-None-Match": "*", "Content-Type": "application/json"}, body=whole)
    call("PUT", "whole", 412, headers={"If-None-Match": "*"}, body=b"again")
    etag = read_back("whole", whole)

    data = b"an aws-chunked body, trailer and all " * 3
    encoded, headers = _aws_chunked(data)
    call("PUT", "chunked", 200, headers={**headers, "Content-Length": str(len(encoded))}, body=encoded)
    read_back("chunked", data)
    call("PUT", "transfer-chunked", 200, headers=headers, body=encoded, chunked=True)
    read_back("transfer-chunked", data)

    changed = b'{"format":1,"holders":["x"]}'
    call("PUT", "whole", 200, headers={"If-Match": etag}, body=changed)
    call("PUT", "whole", 412, headers={"If-Match": etag}, body=b"stale")
    read_back("whole", changed)
    for key in ("whole", "chunked", "transfer-chunked"):
        call("DELETE", key, 204)
    return sent
