"""The local stack's S3 server: localbucket's storage behind AWS Signature V4 and no CORS.

localbucket keeps objects as plain files and checks nothing: it answers anonymous requests and echoes
any `Origin` into `Access-Control-Allow-Origin`. No pip-installable S3 server both persists to disk and
verifies signatures (moto verifies them but keeps everything in memory), so this module serves
localbucket's own request handler in-process with a check in front of every request: there is no
unverified listener left to reach, not even on loopback.

- Every request must be signed (Authorization header or a presigned URL) with a key from the
  credentials file (`{"<access key>": {"secret": "...", "buckets": ["dossier"] | ["*"]}}`, mode 0600);
  anything else answers 403 before localbucket sees it.
- A key may touch only the buckets it lists (a bucket policy: one service's key cannot list another's),
  and, where it has prefix rules (shared.objectkeys), only the objects under its prefixes, each with
  its own actions: every request is checked, the source of a copy and each part of a multipart upload
  included. A key with prefix rules may not list or delete a bucket.
- Each header and query parameter is read once, by the signature check, the rules and localbucket alike:
  a request naming one twice (a header in any case) or with a header line that does not parse answers 400
  before its signature is checked, and the rules refuse a key that localbucket would not take as written
  (`..`, empty segments) instead of judging it by its prefix.
- No CORS at all: preflights are refused and no response carries `Access-Control-Allow-Origin`.

`python -m devstack.objectstore --host 127.0.0.1 --port N --credentials FILE DATA_ROOT`
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import Message
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import localbucket

# The image of the local S3 server copies shared/objectkeys.py beside this file (deploy/containers).
from shared.objectkeys import DELETE, READ, STAT, WRITE

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW = timedelta(minutes=15)
MAX_PRESIGN_SECONDS = 7 * 24 * 3600
LIST = "list"
ADMINISTER = "administer"


class Refused(Exception):
    def __init__(self, code: str, message: str, status: HTTPStatus = HTTPStatus.FORBIDDEN):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


def _malformed(message: str) -> Refused:
    return Refused("InvalidRequest", message, HTTPStatus.BAD_REQUEST)


def read_once(headers: Message, raw_path: str) -> dict[str, str]:
    """The request's headers by lower-case name, each of them and each query parameter present at most once.

    localbucket reads the first of a repeated header (and query parameter), a dict of them holds the last: a
    second `x-amz-copy-source` had the rules judge one source and localbucket copy another. Refusing every
    repetition, not a list of headers that matter today, leaves nothing to read two ways.
    """
    # A line that is not a header ends the headers here and hides the ones after it; a folded value spans lines.
    if headers.defects or headers.get_payload():
        raise _malformed("A header line does not parse.")
    once: dict[str, str] = {}
    for name, value in headers.items():
        lowered = name.lower()
        if lowered in once:
            raise _malformed(f"The request names the header {lowered} more than once.")
        if "\r" in value or "\n" in value:
            raise _malformed(f"The header {lowered} is folded over lines.")
        once[lowered] = value
    names = [name for name, _ in parse_qsl(urlsplit(raw_path).query, keep_blank_values=True)]
    if len(set(names)) < len(names):
        raise _malformed("The request names a query parameter more than once.")
    # Some S3 servers take a presigned request's x-amz-* headers from its query; the rules read only headers.
    if any(name.lower().startswith("x-amz-copy-source") for name in names):
        raise _malformed("A copy source is a header, never a query parameter.")
    return once


def _object_key(key: str) -> str:
    """The key as localbucket will store it, or Refused: the rules never judge `runs/../sha256/...` as `runs/`."""
    if key.endswith("/") or any(part in ("", ".", "..") for part in key.split("/")):
        raise Refused("InvalidArgument", "This server does not support this key.", HTTPStatus.BAD_REQUEST)
    return key


@dataclass(frozen=True)
class Key:
    secret: str
    buckets: tuple[str, ...]
    # Key prefix → the actions allowed under it (shared.objectkeys); None: every object of its buckets.
    prefixes: Mapping[str, frozenset[str]] | None = None

    def allows(self, bucket: str) -> bool:
        # Listing all buckets (bucket "") needs "*".
        return "*" in self.buckets or bucket in self.buckets

    def may(self, action: str, key: str) -> bool:
        if self.prefixes is None:
            return True
        granted = set().union(*(a for p, a in self.prefixes.items() if key.startswith(p)))
        # Reading an object includes asking whether it is there.
        return action in granted or (action == STAT and READ in granted)


def load_keys(path: Path) -> dict[str, Key]:
    raw: dict[str, Any] = json.loads(path.read_text())
    keys = {}
    for name, v in raw.items():
        prefixes = v.get("prefixes")
        rules = None if prefixes is None else {p: frozenset(a) for p, a in prefixes.items()}
        keys[name] = Key(str(v["secret"]), tuple(v.get("buckets", ())), rules)
    return keys


def required(method: str, raw_path: str, headers: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(action, bucket, key) this request needs beyond its bucket: a copy also reads its source.

    Bucket-level requests that name no object are about the bucket itself (HEAD, create, location),
    except a listing (`list`) and deleting the bucket (`administer`), which no prefix rule grants.
    """
    url = urlsplit(raw_path)
    bucket, _, key = unquote(url.path).lstrip("/").partition("/")
    # The names localbucket sees, decoded the same way (`upload%49d` is uploadId).
    query = {name for name, _ in parse_qsl(url.query, keep_blank_values=True)}
    if not key:
        if method == "GET" and bucket and "location" not in query:
            return [(LIST, bucket, "")]
        return [(ADMINISTER, bucket, "")] if method in ("DELETE", "POST") and bucket else []
    key = _object_key(key)
    if "uploadId" in query or "uploads" in query or method in ("PUT", "POST"):
        needs = [(WRITE, bucket, key)]
    else:
        needs = [{"GET": (READ, bucket, key), "HEAD": (STAT, bucket, key)}.get(method, (DELETE, bucket, key))]
    lowered = {k.lower(): v for k, v in headers.items()}
    if method == "PUT" and "x-amz-copy-source" in lowered:
        source = unquote(lowered["x-amz-copy-source"].partition("?")[0]).lstrip("/")
        source_bucket, _, source_key = source.partition("/")
        needs.append((READ, source_bucket, _object_key(source_key)))
    return needs


def _uri_encode(text: str) -> str:
    return quote(text, safe="-_.~")


def _canonical_query(raw_query: str, *, drop: str | None) -> str:
    pairs = []
    for part in raw_query.split("&") if raw_query else []:
        name, _, value = part.partition("=")
        name, value = unquote(name.replace("+", " ")), unquote(value.replace("+", " "))
        if name != drop:
            pairs.append((_uri_encode(name), _uri_encode(value)))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _parse_time(value: str) -> datetime:
    try:
        return datetime.strptime(value, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise Refused("AccessDenied", "The request time is malformed.") from None


def verify(
    method: str, raw_path: str, headers: Mapping[str, str], keys: Mapping[str, Key], now: datetime | None = None
) -> str:
    """Check a request's Signature V4; return the access key that signed it, or raise Refused."""
    now = now or datetime.now(UTC)
    url = urlsplit(raw_path)
    lowered = {k.lower(): v for k, v in headers.items()}
    auth = lowered.get("authorization", "")
    presigned = "X-Amz-Signature=" in url.query
    if auth.startswith(ALGORITHM + " "):
        fields = dict(p.strip().split("=", 1) for p in auth[len(ALGORITHM) + 1 :].split(",") if "=" in p)
        credential, signed, signature = (
            fields.get("Credential", ""),
            fields.get("SignedHeaders", ""),
            fields.get("Signature", ""),
        )
        amz_date = lowered.get("x-amz-date", "")
        payload = lowered.get("x-amz-content-sha256", "")
        if not payload:
            raise Refused("AccessDenied", "x-amz-content-sha256 is required.")
        query = _canonical_query(url.query, drop=None)
        when = _parse_time(amz_date)
        if abs(now - when) > MAX_SKEW:
            raise Refused("RequestTimeTooSkewed", "The difference between the request time and now is too large.")
    elif presigned:
        params = {unquote(k): unquote(v) for k, _, v in (p.partition("=") for p in url.query.split("&"))}
        if params.get("X-Amz-Algorithm") != ALGORITHM:
            raise Refused("AccessDenied", "Only AWS Signature Version 4 is accepted.")
        credential, signed = params.get("X-Amz-Credential", ""), params.get("X-Amz-SignedHeaders", "")
        signature, amz_date, payload = (
            params.get("X-Amz-Signature", ""),
            params.get("X-Amz-Date", ""),
            "UNSIGNED-PAYLOAD",
        )
        query = _canonical_query(url.query, drop="X-Amz-Signature")
        when = _parse_time(amz_date)
        try:
            expires = int(params.get("X-Amz-Expires", "0"))
        except ValueError:
            raise Refused("AccessDenied", "X-Amz-Expires is malformed.") from None
        if not 0 < expires <= MAX_PRESIGN_SECONDS or now > when + timedelta(seconds=expires) or when - now > MAX_SKEW:
            raise Refused("AccessDenied", "Request has expired.")
    else:
        raise Refused("AccessDenied", "Anonymous access is not allowed: sign the request.")
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request" or parts[0] not in keys:
        raise Refused("InvalidAccessKeyId", "The access key does not exist.")
    access_key, date, region, service = parts[0], parts[1], parts[2], parts[3]
    if date != amz_date[:8]:
        raise Refused("AccessDenied", "The credential date does not match the request date.")
    names = [h for h in signed.split(";") if h]
    if "host" not in names:
        raise Refused("AccessDenied", "The host header must be signed.")
    canonical_headers = "".join(f"{h}:{' '.join(lowered.get(h, '').split())}\n" for h in names)
    canonical = "\n".join([method, url.path or "/", query, canonical_headers, ";".join(names), payload])
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    expected = hmac.new(_signing_key(keys[access_key].secret, date, region, service), to_sign.encode(), hashlib.sha256)
    if not hmac.compare_digest(expected.hexdigest(), signature):
        raise Refused(
            "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided."
        )
    return access_key


class SignedS3Handler(localbucket.S3Handler):
    keys: Mapping[str, Key] = {}
    # localbucket writes a response's headers and its body in two sends; with Nagle on, the body of a small
    # answer (CopyObject's XML) waits for the client's delayed ACK of the headers: 40 ms on every copy.
    disable_nagle_algorithm = True

    def _send_headers(self, status: HTTPStatus, length: int, headers: Any = None) -> None:
        # localbucket echoes any Origin into Access-Control-Allow-Origin; without it, it sends none.
        del self.headers["Origin"]
        super()._send_headers(status, length, headers)

    def _dispatch(self, action: Any) -> None:
        try:
            headers = read_once(self.headers, self.path)
            access_key = verify(self.command, self.path, headers, self.keys)
            key = self.keys[access_key]
            bucket = unquote(urlsplit(self.path).path).lstrip("/").partition("/")[0]
            if not key.allows(bucket):
                raise Refused("AccessDenied", "This key may not use this bucket.")
            for need, other_bucket, name in required(self.command, self.path, headers):
                if not key.allows(other_bucket) or not key.may(need, name):
                    raise Refused("AccessDenied", f"This key may not {need} {other_bucket}/{name}.")
        except Refused as refused:
            self._send_error(localbucket.S3Error(refused.status, refused.code, refused.message))
            return
        super()._dispatch(action)

    def do_OPTIONS(self) -> None:
        """No cross-origin use: a preflight is refused, whatever it asks for."""
        self._send_error(localbucket.S3Error(HTTPStatus.FORBIDDEN, "AccessDenied", "CORS is not enabled."))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m devstack.objectstore")
    parser.add_argument("data_root", type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--credentials", type=Path, required=True)
    args = parser.parse_args()
    # Objects and their folders are the owner's alone.
    os.umask(0o077)
    data_root = args.data_root.resolve()
    data_root.mkdir(parents=True, exist_ok=True)
    SignedS3Handler.data_root = data_root
    SignedS3Handler.keys = load_keys(args.credentials)
    server = ThreadingHTTPServer((args.host, args.port), SignedS3Handler)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
