"""A scripted Google Vertex AI (its OAuth token endpoint, Gemini and Anthropic models) for the
HTTP tests, checking our service-account JWTs with PyJWT and serving the bodies a test gives.

usage: vertex_server.py SCRIPT.json LOG.jsonl
       vertex_server.py --make-key DIR
       vertex_server.py --self-test

Binds 127.0.0.1 on a free port, prints `listening http://127.0.0.1:PORT` when ready and
serves until killed (or until the process that started it dies). Its token URI is
`http://127.0.0.1:PORT/token`.

Routes:
- `POST /token`, form-encoded: `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&
  assertion=JWT` (verified with PyJWT: RS256 with `public_key_pem`, `aud` = the token URI,
  `iss` = `client_email`, `scope` containing .../auth/cloud-platform, `exp - iat <= 3600`,
  a `kid` header if any = `private_key_id` when the script gives one), or
  `grant_type=refresh_token&client_id=..&client_secret=..&refresh_token=..` (checked against
  the script's `authorized_user`). Answers `{"access_token": "ya29.<random>", "expires_in",
  "token_type": "Bearer"}`; a bad grant gets 400 `{"error": "invalid_grant", ...}`.
- Gemini: `POST /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent`
  and `...:streamGenerateContent?alt=sse` (without `alt=sse`: 400); express mode
  `POST /v1/publishers/google/models/{m}:(stream)generateContent`.
- Anthropic: `POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict`
  and `:streamRawPredict`; the body must lack `model`, have `"anthropic_version":
  "vertex-2023-10-16"`, and have `"stream": true` exactly for streamRawPredict (else 400).
Each model request needs `Authorization: Bearer <a token issued here, not expired>` or
`x-goog-api-key: <express_key>`; else 401 `{"error": {"code": 401, "message",
"status": "UNAUTHENTICATED"}}`.

SCRIPT.json:

    {"client_email": "...", "public_key_pem": "-----BEGIN PUBLIC KEY-----..." (or a path),
     "private_key_id": optional, "express_key": optional, "expires_in": optional (3600),
     "authorized_user": optional {"client_id", "client_secret", "refresh_token"},
     "token_errors": optional [{"status": N, "body": {...}}, ...],
     "turns": [TURN, ...]}

`token_errors` answer the first token requests, one each, before any grant is checked. Each
model request that passes authentication and the checks above consumes the next TURN:

    {"sse": "<raw SSE body>", "split": N, "pause": SECS}  for the streaming methods
    {"json": {...}}                                         for the unary methods
    {"status": N, "body": {...}}                            any method: that HTTP error

served as given (`split`: pieces of N bytes, flushed, `pause` seconds apart). With no TURN
left the answer is 500.

LOG.jsonl gets one line per request, written before the answer: `{"method", "path" (raw,
with the query), "headers" (lowercased), "body" (parsed JSON; the form as a dict for /token),
"auth": "jwt-ok" | "refresh-ok" | "bearer-ok" | "api-key-ok" | "rejected: why"}`, plus
`"jwt": {"header", "claims"}` and `"token"` (the one issued) for /token, and `"route":
{"project", "location", "publisher", "model", "method"}` and `"turn"` for model requests.
"""
import json
import os
import re
import secrets
import sys
import threading
import time
import uuid
from urllib.parse import parse_qs, urlsplit

import mock_http
from mock_http import QuietHandler, RequestLog, read_body

import jwt

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
ANTHROPIC_VERSION = "vertex-2023-10-16"
STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
MODEL_ROUTE = re.compile(
    r"^/v1/(?:projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/)?"
    r"publishers/(?P<publisher>google|anthropic)/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")
METHODS = {"google": {"generateContent": False, "streamGenerateContent": True},
           "anthropic": {"rawPredict": False, "streamRawPredict": True}}


def google_error(code, message):
    return {"error": {"code": code, "message": message,
                      "status": STATUS_NAMES.get(code, "UNKNOWN")}}


class State(RequestLog):
    def __init__(self, script, log_path):
        super().__init__(log_path)
        self.script = script
        key = script.get("public_key_pem", "")
        if key and not key.lstrip().startswith("-----"):
            with open(key) as f:
                key = f.read()
        self.public_key = key
        self.turns = list(script.get("turns", []))
        self.token_errors = list(script.get("token_errors", []))
        self.next_turn = 0
        self.tokens = {}  # access token -> expiry (time.monotonic())

    def take(self, queue_name, counter_name=None):
        with self.lock:
            if counter_name is None:
                queue = getattr(self, queue_name)
                return queue.pop(0) if queue else None
            index = getattr(self, counter_name)
            if index >= len(self.turns):
                return None, index
            setattr(self, counter_name, index + 1)
            return self.turns[index], index

    def issue(self):
        token = "ya29." + secrets.token_urlsafe(32)
        expires_in = int(self.script.get("expires_in", 3600))
        with self.lock:
            self.tokens[token] = time.monotonic() + expires_in
        return {"access_token": token, "expires_in": expires_in, "token_type": "Bearer"}

    def token_state(self, token):
        with self.lock:
            expiry = self.tokens.get(token)
        if expiry is None:
            return "unknown access token"
        if time.monotonic() >= expiry:
            return "expired access token"
        return None



def check_assertion(assertion, state, audiences):
    """(None, header, claims) for a good service-account JWT, else (reason, header, claims)."""
    script = state.script
    try:
        header = jwt.get_unverified_header(assertion)
        claims = jwt.decode(assertion, options={"verify_signature": False})
    except jwt.InvalidTokenError as e:
        return "not a JWT: %s" % e, None, None
    if header.get("alg") != "RS256":
        return "alg %r, not RS256" % header.get("alg"), header, claims
    kid = script.get("private_key_id")
    if kid and "kid" in header and header["kid"] != kid:
        return "kid %r is not the key's id %r" % (header["kid"], kid), header, claims
    try:
        # `sub` is checked below: Google's endpoint takes `"sub": null` (gcp_auth sends
        # it), which PyJWT's own check refuses.
        jwt.decode(assertion, key=state.public_key, algorithms=["RS256"], audience=audiences,
                   issuer=script.get("client_email"),
                   options={"require": ["iss", "aud", "iat", "exp", "scope"],
                            "verify_sub": False})
    except jwt.InvalidTokenError as e:
        return "%s: %s" % (type(e).__name__, e), header, claims
    if claims.get("sub") is not None and not isinstance(claims["sub"], str):
        return "sub %r is neither a string nor null" % claims["sub"], header, claims
    if CLOUD_PLATFORM not in str(claims.get("scope", "")).split():
        return "scope %r lacks %s" % (claims.get("scope"), CLOUD_PLATFORM), header, claims
    if not isinstance(claims["iat"], int) or not isinstance(claims["exp"], int):
        return "iat and exp must be integers", header, claims
    if claims["exp"] - claims["iat"] > 3600:
        return "exp - iat = %d > 3600" % (claims["exp"] - claims["iat"]), header, claims
    if claims["iat"] > time.time() + 300:
        return "iat is in the future", header, claims
    return None, header, claims


class Handler(QuietHandler):
    server_version = "vertex-test"

    def _send(self, status, obj, content_type="application/json"):
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.send_header("x-request-id", str(uuid.uuid4()))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _entry(self, body, parsed, auth):
        entry = {"method": self.command, "path": self.path,
                 "headers": {k.lower(): v for k, v in self.headers.items()},
                 "body": parsed, "auth": auth}
        if parsed is None and body:
            entry["body_raw"] = body.decode("utf-8", "replace")
        return entry

    def do_GET(self):
        read_body(self)
        self.server.state.log(self._entry(b"", None, "rejected: no route"))
        self._send(404, google_error(404, "no route for GET " + self.path))

    def do_POST(self):
        body = read_body(self)
        if urlsplit(self.path).path == "/token":
            return self.token(body)
        return self.model(body)

    # -- POST /token ------------------------------------------------------------------
    def token(self, body):
        state = self.server.state
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"),
                                             keep_blank_values=True).items()}
        entry = self._entry(body, form, None)
        ctype = self.headers.get("content-type", "")
        scripted = state.take("token_errors")
        if scripted is not None:
            entry["auth"] = "rejected: scripted token error"
            state.log(entry)
            return self._send(int(scripted["status"]), scripted.get("body", {}))
        grant = form.get("grant_type")
        reason = None
        if not ctype.startswith("application/x-www-form-urlencoded"):
            reason = "content-type %r is not a form" % ctype
        elif grant == JWT_BEARER:
            port = self.server.server_address[1]
            audiences = ["http://127.0.0.1:%d/token" % port,
                         "http://%s/token" % self.headers.get("host", "")]
            reason, header, claims = check_assertion(form.get("assertion", ""), state, audiences)
            if header is not None:
                entry["jwt"] = {"header": header, "claims": claims}
            kind = "jwt-ok"
        elif grant == "refresh_token":
            user = state.script.get("authorized_user")
            if not user:
                reason = "refresh_token grant but the script has no authorized_user"
            else:
                for field in ("client_id", "client_secret", "refresh_token"):
                    if form.get(field) != user.get(field):
                        reason = "wrong or missing %s" % field
                        break
            kind = "refresh-ok"
        else:
            reason = "unsupported grant_type %r" % grant
        if reason is not None:
            entry["auth"] = "rejected: " + reason
            state.log(entry)
            error = "invalid_grant" if grant in (JWT_BEARER, "refresh_token") else \
                "unsupported_grant_type"
            return self._send(400, {"error": error, "error_description": reason})
        answer = state.issue()
        entry["auth"] = kind
        entry["token"] = answer["access_token"]
        state.log(entry)
        self._send(200, answer)

    # -- model requests ---------------------------------------------------------------
    def authenticate(self):
        state = self.server.state
        auth = self.headers.get("authorization", "")
        key = self.headers.get("x-goog-api-key")
        if auth.startswith("Bearer "):
            problem = state.token_state(auth[len("Bearer "):])
            return ("bearer-ok", None) if problem is None else ("rejected: " + problem, problem)
        if auth:
            return "rejected: unknown Authorization scheme", "unknown Authorization scheme"
        if key is not None:
            express = state.script.get("express_key")
            if express and key == express:
                return "api-key-ok", None
            return "rejected: wrong API key", "API key not valid. Please pass a valid API key."
        return "rejected: no credentials", "no credentials"

    def model(self, body):
        state = self.server.state
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        split = urlsplit(self.path)
        route = MODEL_ROUTE.match(split.path)
        auth, problem = self.authenticate()
        entry = self._entry(body, parsed, auth)
        if route is None or route.group("method") not in METHODS[route.group("publisher")] \
                or (route.group("project") is None and route.group("publisher") != "google"):
            state.log(entry)
            return self._send(404, google_error(404, "no route for POST " + split.path))
        entry["route"] = route.groupdict()
        if problem is not None:
            state.log(entry)
            return self._send(401, google_error(
                401, "Request had invalid authentication credentials. Expected OAuth 2 access "
                "token, login cookie or other valid authentication credential. (%s)" % problem))
        streaming = METHODS[route.group("publisher")][route.group("method")]
        invalid = None
        if parsed is None or not isinstance(parsed, dict):
            invalid = "the body is not a JSON object"
        elif route.group("publisher") == "anthropic":
            if "model" in parsed:
                invalid = "Extra inputs are not permitted: model"
            elif parsed.get("anthropic_version") != ANTHROPIC_VERSION:
                invalid = "anthropic_version must be %r" % ANTHROPIC_VERSION
            elif (parsed.get("stream") is True) != streaming:
                invalid = "stream must be %s for %s" % (
                    "true" if streaming else "absent or false", route.group("method"))
        elif streaming and parse_qs(split.query).get("alt") != ["sse"]:
            invalid = "this test server serves streamGenerateContent only with alt=sse"
        if invalid is None:
            turn, entry["turn"] = state.take("turns", "next_turn")
        state.log(entry)
        if invalid is not None:
            return self._send(400, google_error(400, invalid))
        if turn is None:
            return self._send(500, google_error(500, "test script: no turn left"))
        if "status" in turn:
            status = int(turn["status"])
            return self._send(status, turn.get("body", google_error(status, "scripted error")))
        if not streaming:
            if "json" not in turn:
                return self._send(500, google_error(
                    500, "test script: turn %d is not a `json` turn" % entry["turn"]))
            return self._send(200, turn["json"])
        if "sse" not in turn:
            return self._send(500, google_error(
                500, "test script: turn %d is not an `sse` turn" % entry["turn"]))
        data = turn["sse"].encode()
        step = int(turn.get("split") or 0) or len(data) or 1
        pause = float(turn.get("pause") or 0)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            for i in range(0, len(data), step):
                piece = data[i:i + step]
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


def make_key(directory, project="llmchain-test"):
    """Writes DIR/sa.json (token_uri "TOKEN_URI", for the test to fill) and DIR/public.pem."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    os.makedirs(directory, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    email = "llmchain-test@%s.iam.gserviceaccount.com" % project
    sa = {"type": "service_account", "project_id": project,
          "private_key_id": secrets.token_hex(20), "private_key": private_pem,
          "client_email": email, "client_id": str(10 ** 20 + secrets.randbelow(10 ** 20)),
          "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": "TOKEN_URI",
          "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
          "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/" + email,
          "universe_domain": "googleapis.com"}
    with open(os.path.join(directory, "sa.json"), "w") as f:
        json.dump(sa, f, indent=2)
    with open(os.path.join(directory, "public.pem"), "w") as f:
        f.write(public_pem)
    return sa, public_pem


# ---------------------------------------------------------------------------------------
# Self-test: a PyJWT-signing client against the server.

def self_test():
    import http.client
    import tempfile
    from urllib.parse import urlencode

    checks = 0

    def ok(cond, what):
        nonlocal checks
        if not cond:
            raise AssertionError(what)
        checks += 1

    tmp = tempfile.mkdtemp()
    sa, public_pem = make_key(tmp)
    with open(os.path.join(tmp, "sa.json")) as f:
        ok(json.load(f)["token_uri"] == "TOKEN_URI", "sa.json placeholder")
    other, _ = make_key(os.path.join(tmp, "other"))
    sse_gemini = ('data: {"candidates": [{"content": {"role": "model", "parts": '
                  '[{"text": "Hel"}]}}]}\r\n\r\n'
                  'data: {"candidates": [{"content": {"role": "model", "parts": '
                  '[{"text": "lo"}]}, "finishReason": "STOP"}]}\r\n\r\n')
    sse_anthropic = ('event: message_start\ndata: {"type": "message_start", "message": {}}\n\n'
                     'event: message_stop\ndata: {"type": "message_stop"}\n\n')
    user = {"client_id": "cid.apps.googleusercontent.com", "client_secret": "csecret",
            "refresh_token": "1//refresh"}
    script = {"client_email": sa["client_email"],
              "public_key_pem": os.path.join(tmp, "public.pem"),
              "private_key_id": sa["private_key_id"], "express_key": "AQ.express",
              "authorized_user": user,
              "token_errors": [{"status": 503, "body": {"error": "internal_failure"}}],
              "turns": [{"sse": sse_gemini, "split": 7}, {"json": {"candidates": []}},
                        {"sse": sse_gemini}, {"json": {"id": "msg_1", "type": "message"}},
                        {"sse": sse_anthropic, "split": 1},
                        {"status": 429, "body": google_error(429, "Quota exceeded")},
                        {"json": {"candidates": []}}]}
    log_path = os.path.join(tmp, "log.jsonl")
    server = make_server(script, log_path)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    token_uri = "http://127.0.0.1:%d/token" % port

    def post(path, body, headers):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        out = resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), resp.read()
        conn.close()
        return out

    def assertion(key=sa, **over):
        now = int(time.time())
        claims = {"iss": sa["client_email"], "scope": CLOUD_PLATFORM, "aud": token_uri,
                  "iat": now, "exp": now + 3600}
        claims.update(over)
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, key["private_key"], algorithm="RS256",
                          headers={"kid": key["private_key_id"]})

    def token(form):
        return post("/token", urlencode(form),
                    {"content-type": "application/x-www-form-urlencoded"})

    status, _, resp = token({"grant_type": JWT_BEARER, "assertion": assertion()})
    ok(status == 503, "scripted token error first")
    status, _, resp = token({"grant_type": JWT_BEARER, "assertion": assertion()})
    answer = json.loads(resp)
    ok(status == 200 and answer["access_token"].startswith("ya29.")
       and answer["expires_in"] == 3600 and answer["token_type"] == "Bearer", "token: %s" % resp)
    bearer = {"authorization": "Bearer " + answer["access_token"],
              "content-type": "application/json"}
    bad = [("a foreign key", {"key": other}),
           ("wrong aud", {"aud": "https://oauth2.googleapis.com/token"}),
           ("wrong iss", {"iss": "someone@else.iam.gserviceaccount.com"}),
           ("no scope", {"scope": None}),
           ("another scope", {"scope": "https://www.googleapis.com/auth/userinfo.email"}),
           ("too long", {"exp": int(time.time()) + 7200}),
           ("expired", {"iat": int(time.time()) - 7200, "exp": int(time.time()) - 3700})]
    for what, over in bad:
        status, _, resp = token({"grant_type": JWT_BEARER, "assertion": assertion(**over)})
        ok(status == 400 and json.loads(resp)["error"] == "invalid_grant",
           "%s rejected: %s %s" % (what, status, resp))
    status, _, _ = token({"grant_type": "client_credentials"})
    ok(status == 400, "unsupported grant")
    status, _, resp = token(dict(user, grant_type="refresh_token"))
    ok(status == 200 and json.loads(resp)["access_token"].startswith("ya29."), "refresh grant")
    status, _, _ = token(dict(user, grant_type="refresh_token", client_secret="x"))
    ok(status == 400, "wrong client secret")

    gemini = "/v1/projects/proj-1/locations/us-central1/publishers/google/models/gemini-2.5-flash"
    claude = ("/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/"
              "claude-sonnet-4@20250514")
    gbody = json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    status, headers, resp = post(gemini + ":streamGenerateContent?alt=sse", gbody, bearer)
    ok(status == 200 and headers["content-type"] == "text/event-stream"
       and resp.decode() == sse_gemini, "gemini stream")
    status, _, resp = post(gemini + ":generateContent", gbody, bearer)
    ok(status == 200 and json.loads(resp) == {"candidates": []}, "gemini unary")
    status, _, resp = post(gemini + ":streamGenerateContent", gbody, bearer)
    ok(status == 400, "stream without alt=sse")
    express = "/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    status, _, resp = post(express, gbody, {"x-goog-api-key": "AQ.express"})
    ok(status == 200 and resp.decode() == sse_gemini, "express mode")
    status, _, resp = post(express, gbody, {"x-goog-api-key": "wrong"})
    ok(status == 401 and json.loads(resp)["error"]["status"] == "UNAUTHENTICATED", "wrong key")
    abody = {"anthropic_version": ANTHROPIC_VERSION, "max_tokens": 10,
             "messages": [{"role": "user", "content": "hi"}]}
    status, _, resp = post(claude + ":rawPredict", json.dumps(abody), bearer)
    ok(status == 200 and json.loads(resp)["id"] == "msg_1", "anthropic rawPredict")
    status, _, resp = post(claude + ":streamRawPredict",
                           json.dumps(dict(abody, stream=True)), bearer)
    ok(status == 200 and resp.decode() == sse_anthropic, "anthropic streamRawPredict")
    for what, b in [("model field", dict(abody, model="claude-sonnet-4")),
                    ("no version", {k: v for k, v in abody.items() if k != "anthropic_version"}),
                    ("wrong version", dict(abody, anthropic_version="2023-06-01")),
                    ("stream on rawPredict", dict(abody, stream=True))]:
        status, _, resp = post(claude + ":rawPredict", json.dumps(b), bearer)
        ok(status == 400 and json.loads(resp)["error"]["status"] == "INVALID_ARGUMENT", what)
    status, _, resp = post(claude + ":rawPredict", json.dumps(abody), bearer)
    ok(status == 429 and json.loads(resp)["error"]["message"] == "Quota exceeded", "scripted 429")
    status, _, resp = post(gemini + ":generateContent", gbody,
                           {"authorization": "Bearer ya29.forged"})
    ok(status == 401, "forged token")
    status, _, resp = post(gemini + ":generateContent", gbody, {})
    ok(status == 401, "no credentials")
    status, _, resp = post("/v1/publishers/anthropic/models/claude:rawPredict", gbody, bearer)
    ok(status == 404, "anthropic has no express route")
    status, _, resp = post(gemini + ":generateContent", gbody, bearer)
    ok(status == 200, "last turn")
    status, _, resp = post(gemini + ":generateContent", gbody, bearer)
    ok(status == 500 and b"no turn left" in resp, "turns exhausted")
    server.shutdown()
    server.server_close()

    # Token expiry: a server issuing 1-second tokens.
    server = make_server(dict(script, expires_in=1, token_errors=[],
                              turns=[{"json": {}}, {"json": {}}]), log_path)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    token_uri = "http://127.0.0.1:%d/token" % port
    status, _, resp = token({"grant_type": JWT_BEARER, "assertion": assertion()})
    answer = json.loads(resp)
    ok(status == 200 and answer["expires_in"] == 1, "short token")
    bearer = {"authorization": "Bearer " + answer["access_token"]}
    status, _, _ = post(gemini + ":generateContent", gbody, bearer)
    ok(status == 200, "fresh token accepted")
    time.sleep(1.1)
    status, _, resp = post(gemini + ":generateContent", gbody, bearer)
    ok(status == 401 and b"expired" in resp, "expired token rejected")
    server.shutdown()
    server.server_close()

    with open(log_path) as f:
        log = [json.loads(line) for line in f]
    jwt_ok = [e for e in log if e["auth"] == "jwt-ok"]
    ok(len(jwt_ok) == 2 and jwt_ok[0]["jwt"]["claims"]["iss"] == sa["client_email"]
       and jwt_ok[0]["jwt"]["header"]["kid"] == sa["private_key_id"] and jwt_ok[0]["token"],
       "token log")
    first = next(e for e in log if e.get("route"))
    ok(first["path"] == "/v1/projects/proj-1/locations/us-central1/publishers/google/models/"
       "gemini-2.5-flash:streamGenerateContent?alt=sse" and first["auth"] == "bearer-ok"
       and first["route"] == {"project": "proj-1", "location": "us-central1",
                              "publisher": "google", "model": "gemini-2.5-flash",
                              "method": "streamGenerateContent"}
       and first["body"]["contents"][0]["role"] == "user" and first["turn"] == 0, "model log")
    ok(any(e["auth"] == "api-key-ok" for e in log), "api key log")
    ok(any(e["auth"] == "rejected: expired access token" for e in log), "expiry log")
    print("self-test: %d checks passed" % checks)


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) == 3 and sys.argv[1] == "--make-key":
        make_key(sys.argv[2])
        print(os.path.join(sys.argv[2], "sa.json"), os.path.join(sys.argv[2], "public.pem"))
        return
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        script = json.load(f)
    mock_http.serve_until_parent_dies(make_server(script, sys.argv[2]))


if __name__ == "__main__":
    main()
