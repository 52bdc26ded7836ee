"""A scripted AWS Bedrock Runtime (Converse and ConverseStream) for the HTTP tests, checking
our requests with independent code: botocore re-signs every request, and the event-stream
frames come from an encoder of our own that the self-test checks against botocore's decoder.

usage: bedrock_server.py SCRIPT.json LOG.jsonl
       bedrock_server.py --self-test

Binds 127.0.0.1 on a free port, prints `listening http://127.0.0.1:PORT` when ready and
serves until killed (or until the process that started it dies).

Routes: `POST /model/{modelId}/converse` (JSON) and `POST /model/{modelId}/converse-stream`
(`application/vnd.amazon.eventstream`, chunked). SCRIPT.json:

    {"credentials": {"access_key": "AKID", "secret_key": "SECRET", "session_token": "opt",
                     "region": "us-east-1", "bearer": "opt Bedrock API key"},
     "turns": [TURN, ...]}

Each request that passes authentication consumes the next TURN (a rejected one consumes
none; with no TURN left the answer is 500). A TURN is one of:

    {"response": {...Converse JSON...}}                    for /converse
    {"stream": [EVENT, ...], "split": N, "pause": SECS,    for /converse-stream
     "corrupt_crc": true, "truncate": K}
    {"status": 400, "body": {"message": "..."}, "error_type": "ValidationException"}

EVENT is `{"type": "messageStart" | "contentBlockStart" | "contentBlockDelta" |
"contentBlockStop" | "messageStop" | "metadata", "payload": {...}}` (an event frame whose
payload is `payload` plus a padding field "p", as AWS sends) or
`{"exception": "throttlingException", "message": "..."}` (an exception frame). `split`
writes the body in pieces of N bytes, flushing (and sleeping `pause` seconds) between them;
`corrupt_crc` flips a byte of the last frame's message CRC; `truncate` drops the last K bytes.
An HTTP error carries `x-amzn-ErrorType: <error_type>:http://internal.amazon.com/...`
(`error_type` defaults from the status).

Authentication: `Authorization: Bearer <credentials.bearer>`, or SigV4 (service `bedrock`,
`credentials.region`), verified by rebuilding the request as received (the path exactly as
sent on the wire, the headers the client listed in SignedHeaders, the body) into a
`botocore.awsrequest.AWSRequest`, signing it with `botocore.auth.SigV4Auth` at the client's
X-Amz-Date and comparing the Authorization headers. A mismatch answers 403
InvalidSignatureException and logs botocore's canonical request.

LOG.jsonl gets one line per request, written before the answer:
`{"method", "path" (raw, as sent), "headers" (lowercased), "body" (parsed JSON or null),
"auth": "sigv4-ok" | "bearer-ok" | "rejected: why", "canonical_request" (on a SigV4 mismatch)}`.
"""
import binascii
import datetime
import hashlib
import json
import os
import re
import struct
import sys
import threading
import time
import uuid
from unittest import mock

import mock_http
from mock_http import QuietHandler, RequestLog, read_body

import botocore.auth
from botocore.auth import SIGNED_HEADERS_BLACKLIST, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

SERVICE = "bedrock"
SIGV4_TIMESTAMP = "%Y%m%dT%H%M%SZ"
MAX_SKEW = datetime.timedelta(minutes=15)
PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
EVENT_TYPES = {"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop",
               "messageStop", "metadata"}
ERROR_TYPES = {400: "ValidationException", 403: "AccessDeniedException",
               404: "ResourceNotFoundException", 408: "ModelTimeoutException",
               424: "ModelErrorException", 429: "ThrottlingException",
               500: "InternalServerException", 503: "ServiceUnavailableException"}
ERROR_TYPE_SUFFIX = ":http://internal.amazon.com/coral/com.amazon.bedrock/"


# ---------------------------------------------------------------------------------------
# The event-stream encoder (our own; the self-test decodes its output with botocore's).

def _crc(data, start=0):
    return binascii.crc32(data, start) & 0xFFFFFFFF


def encode_frame(headers, payload):
    """One `application/vnd.amazon.eventstream` message: headers is a list of (name, str)."""
    hbytes = b""
    for name, value in headers:
        n, v = name.encode(), value.encode()
        hbytes += struct.pack(">B", len(n)) + n + struct.pack(">BH", 7, len(v)) + v
    total = 12 + len(hbytes) + len(payload) + 4
    prelude = struct.pack(">II", total, len(hbytes))
    message = prelude + struct.pack(">I", _crc(prelude)) + hbytes + payload
    return message + struct.pack(">I", _crc(message))


def event_frame(event_type, payload, index=0):
    body = dict(payload)
    # AWS pads each event with a field "p" of varying length (hiding the payload's size).
    body["p"] = PADDING[: 4 + (index * 7) % (len(PADDING) - 4)]
    return encode_frame([(":event-type", event_type), (":content-type", "application/json"),
                         (":message-type", "event")],
                        json.dumps(body, separators=(",", ":")).encode())


def exception_frame(exception_type, message):
    return encode_frame([(":exception-type", exception_type),
                         (":content-type", "application/json"),
                         (":message-type", "exception")],
                        json.dumps({"message": message}).encode())


def stream_body(turn):
    """The bytes of a `stream` TURN, corruption and truncation applied."""
    frames = []
    for i, ev in enumerate(turn["stream"]):
        if "exception" in ev:
            frames.append(exception_frame(ev["exception"], ev.get("message", "")))
        else:
            if ev["type"] not in EVENT_TYPES:
                raise ValueError("unknown event type %r" % ev["type"])
            frames.append(event_frame(ev["type"], ev.get("payload", {}), i))
    if turn.get("corrupt_crc") and frames:
        last = bytearray(frames[-1])
        last[-1] ^= 0xFF
        frames[-1] = bytes(last)
    body = b"".join(frames)
    k = int(turn.get("truncate", 0))
    return body[: len(body) - k] if k else body


# ---------------------------------------------------------------------------------------
# SigV4, checked by botocore.

class _RecordingSigV4Auth(SigV4Auth):
    """botocore's signer, recording the canonical request it built. botocore never signs a
    few headers (user-agent, ...) that AWS accepts when a client lists them: those the client
    listed are put back, so the signed set is exactly the client's."""

    def __init__(self, credentials, service, region, extra_signed):
        super().__init__(credentials, service, region)
        self.extra_signed = extra_signed
        self.canonical = None

    def headers_to_sign(self, request):
        header_map = super().headers_to_sign(request)
        for name in self.extra_signed:
            for value in request.headers.get_all(name) or []:
                header_map[name] = value
        return header_map

    def canonical_request(self, request):
        self.canonical = super().canonical_request(request)
        return self.canonical


_SIGN_LOCK = threading.Lock()
BAD_SIG = "InvalidSignatureException"
BAD_CLIENT = "UnrecognizedClientException"


def parse_sigv4_authorization(value):
    if not value.startswith("AWS4-HMAC-SHA256 "):
        return None
    parts = {}
    for item in value[len("AWS4-HMAC-SHA256 "):].split(","):
        key, _, val = item.strip().partition("=")
        parts[key] = val
    if set(parts) != {"Credential", "SignedHeaders", "Signature"}:
        return None
    return parts


def verify_sigv4(method, url, headers, body, creds, service, region, now=None):
    """Checks a request's SigV4 Authorization header with botocore.

    url: scheme://host + the path and query exactly as sent; headers: [(name, value)] as
    received; creds: {"access_key", "secret_key", "session_token"?}. Returns
    (None, None, canonical) when valid, else (AWS error type, reason, canonical or None).
    `now` (a naive UTC datetime) enables the 15-minute clock-skew check."""
    hmap = {}
    for name, value in headers:
        hmap.setdefault(name.lower(), []).append(value)
    auth = (hmap.get("authorization") or [""])[0]
    parts = parse_sigv4_authorization(auth)
    if parts is None:
        return BAD_SIG, "malformed SigV4 Authorization header %r" % auth, None
    scope = parts["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        return BAD_SIG, "malformed credential scope %r" % parts["Credential"], None
    access_key, date, c_region, c_service, _ = scope
    if access_key != creds.get("access_key"):
        return BAD_CLIENT, "unknown access key %r" % access_key, None
    if c_service != service:
        return BAD_SIG, "credential scope names service %r, not %r" % (c_service, service), None
    if c_region != region:
        return BAD_SIG, "credential scope names region %r, not %r" % (c_region, region), None
    amz_date = (hmap.get("x-amz-date") or [""])[0]
    try:
        stamp = datetime.datetime.strptime(amz_date, SIGV4_TIMESTAMP)
    except ValueError:
        return BAD_SIG, "missing or malformed X-Amz-Date %r" % amz_date, None
    if date != amz_date[:8]:
        return BAD_SIG, "credential scope date %s is not X-Amz-Date's %s" % (date, amz_date), None
    if now is not None and abs(now - stamp) > MAX_SKEW:
        return BAD_SIG, "Signature expired: X-Amz-Date %s is 15 minutes off" % amz_date, None
    signed = parts["SignedHeaders"].split(";")
    if signed != sorted(set(signed)) or any(s != s.lower() or not s for s in signed):
        why = "SignedHeaders %r is not sorted, unique and lowercase" % parts["SignedHeaders"]
        return BAD_SIG, why, None
    for required in ("host", "x-amz-date"):
        if required not in signed:
            return BAD_SIG, "SignedHeaders lacks %s" % required, None
    token = creds.get("session_token")
    sent_token = (hmap.get("x-amz-security-token") or [None])[0]
    if token and sent_token != token:
        return BAD_CLIENT, "missing or wrong X-Amz-Security-Token", None
    if not token and sent_token is not None:
        return BAD_CLIENT, "unexpected X-Amz-Security-Token", None
    if "x-amz-content-sha256" in signed:
        declared = hmap["x-amz-content-sha256"][0] if "x-amz-content-sha256" in hmap else None
        if declared != hashlib.sha256(body).hexdigest():
            return BAD_SIG, "X-Amz-Content-SHA256 %r is not the body's SHA-256" % declared, None
    request = AWSRequest(method=method, url=url, data=body)
    for name in signed:
        if name not in hmap:
            return BAD_SIG, "signed header %r is not in the request" % name, None
        for value in hmap[name]:
            request.headers[name] = value
    extra = [n for n in signed if n in SIGNED_HEADERS_BLACKLIST]
    signer = _RecordingSigV4Auth(Credentials(creds["access_key"], creds["secret_key"], token),
                                 service, region, extra)
    # botocore signs "now": pin its clock to the client's X-Amz-Date, as its own tests do.
    with _SIGN_LOCK, mock.patch.object(botocore.auth, "get_current_datetime",
                                       return_value=stamp):
        signer.add_auth(request)
    expected = request.headers["Authorization"]
    if expected != auth:
        return (BAD_SIG, "signature mismatch: botocore computed %r, the request has %r"
                % (expected, auth), signer.canonical)
    return None, None, signer.canonical


# ---------------------------------------------------------------------------------------
# The server.

class State(RequestLog):
    def __init__(self, script, log_path):
        super().__init__(log_path)
        self.creds = script.get("credentials", {})
        self.turns = list(script.get("turns", []))
        self.next_turn = 0

    def take_turn(self):
        with self.lock:
            if self.next_turn >= len(self.turns):
                return None, self.next_turn
            self.next_turn += 1
            return self.turns[self.next_turn - 1], self.next_turn - 1



ROUTE = re.compile(r"^/model/([^/?]+)/(converse|converse-stream)$")


class Handler(QuietHandler):
    server_version = "bedrock-test"

    def _send(self, status, obj, extra_headers=()):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        for k, v in extra_headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, status, error_type, message):
        self._send(status, {"message": message},
                   [("x-amzn-ErrorType", error_type + ERROR_TYPE_SUFFIX)])

    def authenticate(self, body):
        """(log text, AWS error type or None, botocore's canonical request or None)."""
        creds = self.server.state.creds
        auth = self.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            if creds.get("bearer") and auth[len("Bearer "):] == creds["bearer"]:
                return "bearer-ok", None, None
            return "rejected: wrong Bedrock API key", "UnrecognizedClientException", None
        if auth.startswith("AWS4-HMAC-SHA256 "):
            if not creds.get("access_key"):
                return "rejected: SigV4 but the script has no access key", BAD_CLIENT, None
            url = "http://%s%s" % (self.headers.get("host", ""), self.path)
            now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
            error, reason, canonical = verify_sigv4(
                self.command, url, self.headers.items(), body, creds, SERVICE,
                creds.get("region", "us-east-1"), now=now)
            if error is None:
                return "sigv4-ok", None, None
            return "rejected: " + reason, error, canonical
        why = "no Authorization header" if not auth else "unknown Authorization scheme"
        return "rejected: " + why, "MissingAuthenticationTokenException", None

    def do_GET(self):
        read_body(self)
        self.server.state.log({"method": "GET", "path": self.path,
                               "headers": {k.lower(): v for k, v in self.headers.items()},
                               "body": None, "auth": "rejected: no route"})
        self._error(404, "UnknownOperationException", "no route for GET %s" % self.path)

    def do_POST(self):
        state = self.server.state
        body = read_body(self)
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        auth, error, canonical = self.authenticate(body)
        entry = {"method": self.command, "path": self.path,
                 "headers": {k.lower(): v for k, v in self.headers.items()},
                 "body": parsed, "auth": auth}
        if parsed is None and body:
            entry["body_raw"] = body.decode("utf-8", "replace")
        if canonical is not None:
            entry["canonical_request"] = canonical
        route = ROUTE.match(self.path)
        turn = None
        if error is None and route is not None:
            turn, entry["turn"] = state.take_turn()
        state.log(entry)
        if error == BAD_SIG:
            why = auth[len("rejected: "):]
            if why.startswith("Signature expired"):
                return self._error(403, error, why)
            return self._error(403, error, "The request signature we calculated does not match "
                               "the signature you provided. Check your AWS Secret Access Key "
                               "and signing method. (" + why + ")")
        if error == BAD_CLIENT:
            return self._error(403, error, "The security token included in the request is "
                               "invalid. (" + auth[len("rejected: "):] + ")")
        if error is not None:
            return self._error(403, error, "Authentication failed: " + auth[len("rejected: "):])
        if route is None:
            return self._error(404, "UnknownOperationException", "no route for " + self.path)
        index = entry["turn"]
        if turn is None:
            return self._error(500, "InternalServerException", "test script: no turn left")
        operation = route.group(2)
        if "status" in turn:
            status = int(turn["status"])
            etype = turn.get("error_type") or ERROR_TYPES.get(status, "InternalServerException")
            return self._send(status, turn.get("body", {"message": ""}),
                              [("x-amzn-ErrorType", etype + ERROR_TYPE_SUFFIX)])
        if operation == "converse":
            if "response" not in turn:
                return self._error(500, "InternalServerException",
                                   "test script: turn %d is not a `response` turn" % index)
            return self._send(200, turn["response"])
        if "stream" not in turn:
            return self._error(500, "InternalServerException",
                               "test script: turn %d is not a `stream` turn" % index)
        try:
            data = stream_body(turn)
        except (ValueError, KeyError, TypeError) as e:
            return self._error(500, "InternalServerException",
                               "test script: turn %d: %r" % (index, e))
        split = int(turn.get("split") or 0) or len(data) or 1
        pause = float(turn.get("pause") or 0)
        self.send_response(200)
        self.send_header("content-type", "application/vnd.amazon.eventstream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.end_headers()
        self.wfile.flush()
        try:
            for i in range(0, len(data), split):
                piece = data[i:i + split]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
                if pause:
                    time.sleep(pause)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def make_server(script, log_path):
    return mock_http.make_server(Handler, State(script, log_path))


# ---------------------------------------------------------------------------------------
# Self-test: our frames through botocore's decoder; botocore-signed (and mis-signed)
# requests, and botocore's own bedrock-runtime client, against the server.

def self_test():
    import http.client
    import tempfile

    import botocore.config
    import botocore.exceptions
    import botocore.session

    from botocore.eventstream import ChecksumMismatch, EventStreamBuffer
    from botocore.utils import percent_encode

    def decode(data, step=None):
        buf, out = EventStreamBuffer(), []
        step = step or len(data) or 1
        for i in range(0, len(data), step):
            buf.add_data(data[i:i + step])
            out.extend(buf)
        return out, len(buf._data)

    checks = 0

    def ok(cond, what):
        nonlocal checks
        if not cond:
            raise AssertionError(what)
        checks += 1

    # 1. The encoder, against botocore's decoder, whole and byte by byte.
    events = [
        {"type": "messageStart", "payload": {"role": "assistant"}},
        {"type": "contentBlockDelta",
         "payload": {"contentBlockIndex": 0, "delta": {"text": "Hé ✓"}}},
        {"type": "contentBlockStart", "payload": {"contentBlockIndex": 1, "start": {
            "toolUse": {"toolUseId": "tooluse_1", "name": "get_weather"}}}},
        {"type": "contentBlockDelta", "payload": {"contentBlockIndex": 1, "delta": {
            "toolUse": {"input": "{\"city\": \"Par"}}}},
        {"type": "contentBlockStop", "payload": {"contentBlockIndex": 1}},
        {"type": "messageStop", "payload": {"stopReason": "tool_use"}},
        {"type": "metadata", "payload": {"usage": {"inputTokens": 3, "outputTokens": 4,
                                                   "totalTokens": 7}, "metrics": {"latencyMs": 5}}},
        {"exception": "throttlingException", "message": "Too many requests"},
    ]
    TYPES = [e["type"] for e in events[:7]]
    data = stream_body({"stream": events})
    for step in (None, 1, 7):
        msgs, rest = decode(data, step)
        ok(rest == 0 and len(msgs) == len(events), "frame count (step %s)" % step)
        for ev, msg in zip(events, msgs):
            payload = json.loads(msg.payload)
            if "type" in ev:
                ok(isinstance(payload.pop("p", None), str), "padding")
                ok(msg.headers == {":event-type": ev["type"], ":content-type": "application/json",
                                   ":message-type": "event"}, "event headers")
                ok(payload == ev["payload"], "event payload")
            else:
                ok(msg.headers == {":exception-type": ev["exception"], ":message-type": "exception",
                                   ":content-type": "application/json"}, "exception headers")
                ok(payload == {"message": ev["message"]}, "exception payload")
    # Corrupted CRC: botocore raises on the last frame, after decoding the others.
    bad = stream_body({"stream": events[:3], "corrupt_crc": True})
    buf, seen = EventStreamBuffer(), 0
    buf.add_data(bad)
    try:
        for _ in buf:
            seen += 1
        ok(False, "corrupt CRC accepted")
    except ChecksumMismatch:
        ok(seen == 2, "frames before the corrupt one")
    # Truncated: every frame but the cut one decodes, the rest stays buffered.
    msgs, rest = decode(stream_body({"stream": events[:3], "truncate": 5}))
    ok(len(msgs) == 2 and rest > 0, "truncated stream")

    # 2. SigV4 verification against AWS's published `get-vanilla` test vector.
    _, reason, _ = verify_sigv4(
        "GET", "https://example.amazonaws.com/",
        [("Host", "example.amazonaws.com"), ("X-Amz-Date", "20150830T123600Z"),
         ("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
          "aws4_request, SignedHeaders=host;x-amz-date, Signature="
          "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")],
        b"", {"access_key": "AKIDEXAMPLE",
              "secret_key": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}, "service", "us-east-1")
    ok(reason is None, "get-vanilla vector: %s" % reason)

    # 3. The server, with botocore-signed requests.
    tmp = tempfile.mkdtemp()
    log_path = os.path.join(tmp, "log.jsonl")
    creds = {"access_key": "AKIDTEST", "secret_key": "secret/key+TEST", "session_token": "tok=en/1",
             "region": "us-west-2", "bearer": "ABSKbedrock-api-key"}
    converse = {"output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}},
                "stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 1,
                                                    "totalTokens": 2}}
    turns = [{"response": converse}, {"stream": events[:7], "split": 5},
             {"response": converse}, {"stream": events[:7]},
             {"response": converse}, {"stream": events[:7], "split": 1},
             {"status": 400, "body": {"message": "Malformed input request"}},
             {"response": converse}, {"stream": events[:2] + [events[7]], "split": 3}]
    server = make_server({"credentials": creds, "turns": turns}, log_path)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    host = "127.0.0.1:%d" % port

    def send(path, body, headers):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        out = resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), resp.read()
        conn.close()
        return out

    def signed(path, body, secret=creds["secret_key"], token=creds["session_token"]):
        req = AWSRequest("POST", "http://%s%s" % (host, path), data=body,
                         headers={"Content-Type": "application/json"})
        SigV4Auth(Credentials(creds["access_key"], secret, token), "bedrock",
                  creds["region"]).add_auth(req)
        return send(path, body, dict(req.headers.items()))

    model_ids = ["anthropic.claude-3-5-sonnet-20241022-v2:0",
                 "arn:aws:bedrock:us-east-1:123456789012:inference-profile/"
                 "us.anthropic.claude-3-5-sonnet-20241022-v2:0"]
    body = json.dumps({"messages": [{"role": "user", "content": [{"text": "hi"}]}]}).encode()
    for model in model_ids:
        quoted = percent_encode(model)  # botocore's own path-label encoding: `:` and `/` too
        status, _, resp = signed("/model/%s/converse" % quoted, body)
        ok(status == 200 and json.loads(resp) == converse,
           "converse %s: %s %s" % (model, status, resp))
        status, headers, resp = signed("/model/%s/converse-stream" % quoted, body)
        ok(status == 200 and headers["content-type"] == "application/vnd.amazon.eventstream",
           "stream status")
        msgs, rest = decode(resp, 3)
        ok(rest == 0 and [m.headers[":event-type"] for m in msgs] == TYPES, "stream events")
    # Wrong secret, wrong token, a tampered body, the path signed unencoded, a stale date.
    path = "/model/%s/converse" % percent_encode(model_ids[0])
    status, headers, resp = signed(path, body, secret="wrong")
    ok(status == 403 and headers["x-amzn-errortype"].startswith("InvalidSignatureException")
       and b"does not match" in resp, "wrong secret rejected: %s %s" % (status, resp))
    status, headers, resp = signed(path, body, token="other")
    ok(status == 403 and headers["x-amzn-errortype"].startswith("UnrecognizedClientException"),
       "wrong token rejected")
    req = AWSRequest("POST", "http://%s%s" % (host, path), data=body)
    SigV4Auth(Credentials(creds["access_key"], creds["secret_key"], creds["session_token"]),
              "bedrock", creds["region"]).add_auth(req)
    status, _, _ = send(path, body + b" ", dict(req.headers.items()))
    ok(status == 403, "tampered body rejected")
    # A client that signs the model id as `:` but sends `%3A` (the classic double-encoding bug).
    raw_path = "/model/%s/converse" % model_ids[0]
    req = AWSRequest("POST", "http://%s%s" % (host, raw_path), data=body)
    SigV4Auth(Credentials(creds["access_key"], creds["secret_key"], creds["session_token"]),
              "bedrock", creds["region"]).add_auth(req)
    status, _, _ = send(path, body, dict(req.headers.items()))
    ok(status == 403, "path signed unencoded rejected")
    with mock.patch.object(botocore.auth, "get_current_datetime",
                           return_value=datetime.datetime.now(datetime.timezone.utc).replace(
                               tzinfo=None) - datetime.timedelta(minutes=20)):
        req = AWSRequest("POST", "http://%s%s" % (host, path), data=body)
        SigV4Auth(Credentials(creds["access_key"], creds["secret_key"], creds["session_token"]),
                  "bedrock", creds["region"]).add_auth(req)
    status, _, resp = send(path, body, dict(req.headers.items()))
    ok(status == 403 and b"expired" in resp, "stale date rejected")
    status, _, _ = send(path, body, {"Authorization": "Bearer nope"})
    ok(status == 403, "wrong bearer rejected")
    status, _, _ = send(path, body, {})
    ok(status == 403, "no auth rejected")
    # 4. botocore's own bedrock-runtime client (its URL encoding, signing, stream parsing).
    session = botocore.session.get_session()
    client = session.create_client(
        "bedrock-runtime", region_name=creds["region"], endpoint_url="http://" + host,
        aws_access_key_id=creds["access_key"], aws_secret_access_key=creds["secret_key"],
        aws_session_token=creds["session_token"],
        config=botocore.config.Config(retries={"max_attempts": 1}))
    hello = [{"role": "user", "content": [{"text": "hi"}]}]
    out = client.converse(modelId=model_ids[1], messages=hello)
    ok(out["output"] == converse["output"], "botocore client converse")
    out = client.converse_stream(modelId=model_ids[0], messages=hello)
    got = [next(iter(ev)) for ev in out["stream"]]
    ok(got == TYPES, "botocore client stream: %s" % got)
    try:
        client.converse(modelId=model_ids[0], messages=hello)
        ok(False, "400 not raised")
    except client.exceptions.ValidationException as e:
        ok("Malformed" in str(e), "botocore parses the 400 as ValidationException")
    # Bearer (Bedrock API key).
    status, _, resp = send(path, body, {"Authorization": "Bearer " + creds["bearer"]})
    ok(status == 200, "bearer accepted")
    out = client.converse_stream(modelId=model_ids[0], messages=hello)
    try:
        list(out["stream"])
        ok(False, "exception frame not raised")
    except botocore.exceptions.EventStreamError as e:
        ok(e.response["Error"] == {"Code": "throttlingException", "Message": "Too many requests"},
           "botocore raises the exception frame: %r" % e.response)
    out["stream"].close()
    client.close()
    server.shutdown()
    server.server_close()
    with open(log_path) as f:
        log = [json.loads(line) for line in f]
    ok(log[0]["path"] == "/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse", "raw path")
    ok(log[0]["auth"] == "sigv4-ok" and log[0]["body"]["messages"][0]["role"] == "user",
       "log entry")
    ok(log[2]["path"] == "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile"
       "%2Fus.anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse", "ARN path")
    mismatch = [e for e in log if "signature mismatch" in e["auth"]]
    ok(mismatch and "/model/anthropic.claude-3-5-sonnet-20241022-v2%253A0/converse\n"
       in mismatch[0]["canonical_request"], "canonical request double-encodes the path")
    ok(sum(e["auth"] == "sigv4-ok" for e in log) == 8, "sigv4-ok count")
    print("self-test: %d checks passed" % checks)


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        script = json.load(f)
    mock_http.serve_until_parent_dies(make_server(script, sys.argv[2]))


if __name__ == "__main__":
    main()
