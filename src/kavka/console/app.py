"""The console's web application: Starlette routes over `views`, Jinja2 templates, static files.

Request flow: a route parses the URL/form, calls a `views` function in a worker thread under
`Backend.lock` (kavka's AdminClient is blocking and not thread-safe), and renders a template.
State-changing requests are POSTs that (1) are refused in read-only mode, (2) carry the CSRF
token of the page that made them (double submit: a random cookie, SameSite=Strict, equal to a
hidden form field; and an Origin, when sent, equal to the console's own), and (3) go through a
confirm step: a first POST renders what will happen, only a POST with `confirmed=1` does it.
Errors are pages with a message, never a stack trace.

Log-in mode (the cluster needs SASL and `--command-config` names the mechanism but no
credentials): `/login` asks for a user name and password, checks them by authenticating to the
cluster, and keeps them server-side in that user's own `Backend` (its SASL factory), under a
random session id that is the only thing in the session cookie (HttpOnly, SameSite=Strict, a new
id at every log-in). Every admin call of the session is made as that principal, so the cluster's
ACLs apply to what each user sees and does. Form contents are never logged.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from kavka.client.admin import AdminClient
from kavka.client.errors import KafkaConnectionError, KafkaError, KafkaProtocolError
from kavka.client.fetcher import Fetcher
from kavka.client.security import PLAIN, PLAINTEXT, ClientSecurity, plain, scram
from kavka.console import moves, views
from kavka.console.views import UserError

HERE = Path(__file__).parent
CSRF_COOKIE = "kavka_console_csrf"
SESSION_COOKIE = "kavka_console_session"
SESSION_IDLE_S = 30 * 60  # a session unused this long is closed (its credentials dropped)
MAX_SESSIONS = 100  # beyond it the least recently used session is closed
log = logging.getLogger("kavka.console")
T = TypeVar("T")


class Backend:
    """The console's one connection to the cluster (an admin client and a fetcher), used by one
    request at a time."""

    def __init__(self, bootstrap: str, *, security: ClientSecurity = PLAINTEXT, read_only: bool = False,
                 user: str | None = None, metrics_urls: dict[int, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.metrics_urls = metrics_urls or {}  # broker id -> its Prometheus endpoint (--metrics-url)
        self.security = security
        self.read_only = read_only
        self.user = user  # the logged-in user (log-in mode), None otherwise
        self.lock = threading.Lock()
        self.admin = AdminClient(bootstrap, client_id="kavka-console", timeout_s=15, security=security)
        self.fetcher = Fetcher(bootstrap, client_id="kavka-console", timeout_s=5, max_wait_ms=100, security=security)
        self._features: dict[str, bool] | None = None
        self.throughput = views.Throughput()  # the Overview's log-end samples (used under the lock)
        self.lag_history = views.LagHistory()  # the group pages' lag samples (used under the lock)

    def close(self) -> None:
        with self.lock:
            self.admin.close()
            self.fetcher.close()

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self.lock:
            try:
                return fn(*args, **kwargs)
            except (KafkaConnectionError, OSError):
                # A broker went away: drop every connection so the next request starts afresh.
                self.admin.close()
                self.fetcher.close()
                raise

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await run_in_threadpool(self._call, fn, *args, **kwargs)

    async def features(self) -> dict[str, bool]:
        if self._features is None:
            self._features = await self.run(views.kavka_features, self.admin)
        return self._features


class LoginRequired(Exception):
    """The console runs in log-in mode and this request carries no live session."""


def with_credentials(base: ClientSecurity, username: str, password: str) -> ClientSecurity:
    """The log-in mode's security (protocol, TLS context, mechanism) with one user's credentials."""
    if base.mechanism == PLAIN:
        return plain(base.listener, base.protocol, username, password, base.ssl_context)
    assert base.mechanism is not None
    return scram(base.listener, base.protocol, base.mechanism, username, password, base.ssl_context)


class Sessions:
    """Log-in mode: one `Backend` per logged-in user, keyed by a random session id. The password
    lives only in that backend's SASL client factory, in this process's memory."""

    def __init__(self, bootstrap: str, base: ClientSecurity, read_only: bool, metrics_urls: dict[int, str]) -> None:
        self.bootstrap, self.base, self.read_only, self.metrics_urls = bootstrap, base, read_only, metrics_urls
        self.lock = threading.Lock()
        self._live: dict[str, tuple[str, Backend, float]] = {}  # id -> (user, backend, last used)

    def login(self, username: str, password: str) -> str:
        """Authenticates to the cluster as the user (KafkaConnectionError if refused); a new session id."""
        backend = Backend(self.bootstrap, security=with_credentials(self.base, username, password),
                          read_only=self.read_only, user=username, metrics_urls=self.metrics_urls)
        try:
            backend._call(backend.admin.describe_cluster)
        except Exception:
            backend.close()
            raise
        sid = secrets.token_urlsafe(32)
        with self.lock:
            self._live[sid] = (username, backend, time.monotonic())
            stale = self._expire_locked()
        for b in stale:
            b.close()
        return sid

    def _expire_locked(self) -> list[Backend]:
        now = time.monotonic()
        dead = [sid for sid, (_, _, used) in self._live.items() if now - used > SESSION_IDLE_S]
        by_age = sorted((used, sid) for sid, (_, _, used) in self._live.items() if sid not in dead)
        dead += [sid for _, sid in by_age[: max(0, len(by_age) - MAX_SESSIONS)]]
        return [self._live.pop(sid)[1] for sid in dead]

    def get(self, sid: str | None) -> Backend | None:
        with self.lock:
            stale = self._expire_locked()
            entry = self._live.get(sid or "")
            if entry is not None:
                self._live[sid or ""] = (entry[0], entry[1], time.monotonic())
        for b in stale:
            b.close()
        return entry[1] if entry else None

    def logout(self, sid: str | None) -> None:
        with self.lock:
            entry = self._live.pop(sid or "", None)
        if entry:
            entry[1].close()

    def close(self) -> None:
        with self.lock:
            live, self._live = list(self._live.values()), {}
        for _, b, _ in live:
            b.close()


templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.filters["human_bytes"] = lambda n: views_human_bytes(n)
templates.env.filters["q"] = lambda s: quote(str(s), safe="")


def views_human_bytes(n: int | None) -> str:
    if n is None or n < 0:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def backend_of(request: Request) -> Backend:
    sessions: Sessions | None = request.app.state.sessions
    if sessions is None:
        return request.app.state.backend
    b = sessions.get(request.cookies.get(SESSION_COOKIE))
    if b is None:
        raise LoginRequired()
    return b


def csrf_token(request: Request) -> str:
    token = request.cookies.get(CSRF_COOKIE)
    if not token or len(token) < 32:
        token = request.scope.setdefault("kavka.new_csrf", secrets.token_urlsafe(32))
    return token


async def page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
    try:
        b: Backend | None = backend_of(request)
    except LoginRequired:
        b = None
    if b is None:
        feats: dict[str, bool] = {}
    else:
        feats = await b.features() if template != "error.html" else (b._features or {})
    token = csrf_token(request)
    resp = templates.TemplateResponse(
        request, template, {"csrf": token, "read_only": request.app.state.read_only, "features": feats,
                            "bootstrap": request.app.state.bootstrap, "user": b.user if b else None,
                            "login_mode": request.app.state.sessions is not None, **context}, status_code=status)
    if request.cookies.get(CSRF_COOKIE) != token:
        resp.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path="/")
    return resp


async def mutation_form(request: Request) -> Any:
    """The form of a state-changing request, after the log-in, read-only, Origin and CSRF checks."""
    if backend_of(request).read_only:
        raise UserError("The console runs in read-only mode (--read-only): changes are refused.", 403)
    return await checked_form(request)


async def checked_form(request: Request) -> Any:
    """A POST's form after the Origin and CSRF (double submit) checks."""
    origin = request.headers.get("origin")
    if origin is not None:  # browsers send it on every POST; "null" (an opaque origin) is refused too
        host = request.headers.get("host", "")
        if origin == "null" or urlsplit(origin).netloc != host:
            raise UserError("Cross-site request refused (its Origin is not this console).", 403)
    form = await request.form()
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = str(form.get("csrf", ""))
    if not cookie or not hmac.compare_digest(cookie.encode(), sent.encode()):
        raise UserError("The request's CSRF token is missing or stale: reload the page and try again.", 403)
    return form


def confirmed(form: Any) -> bool:
    return form.get("confirmed") == "1"


async def confirm_page(request: Request, form: Any, title: str, summary: list[tuple[str, Any]], danger: bool = False) -> Response:
    fields = [(k, v) for k, v in form.multi_items() if k not in ("csrf", "confirmed")]
    return await page(request, "confirm.html", title=title, summary=summary, fields=fields,
                      action=request.url.path, danger=danger)


# ---------------------------------------------------------------------- pages


async def overview(request: Request) -> Response:
    b = backend_of(request)
    feats = await b.features()
    data = await b.run(lambda: views.overview(b.admin, feats, b.throughput, time.monotonic(), b.metrics_urls))
    return await page(request, "overview.html", o=data, nav="overview")


async def topics(request: Request) -> Response:
    b = backend_of(request)
    q = request.query_params.get("q", "")
    rows = await b.run(views.topics, b.admin, q)
    return await page(request, "topics.html", topics=rows, q=q, nav="topics")


async def create_topic(request: Request) -> Response:
    b = backend_of(request)
    form = await mutation_form(request)
    t = views.parse_topic_form(form)
    if not confirmed(form):
        return await confirm_page(request, form, f"Create topic {t.name}?", [
            ("Topic", t.name), ("Partitions", t.partitions if t.partitions > 0 else "broker default"),
            ("Replication factor", t.replication_factor if t.replication_factor > 0 else "broker default"),
            ("Configs", ", ".join(f"{k}={v}" for k, v in t.configs.items()) or "-")])
    await b.run(views.create_topic, b.admin, t)
    return RedirectResponse(f"/topics/{quote(t.name, safe='')}?created=1", status_code=303)


async def topic(request: Request) -> Response:
    b = backend_of(request)
    data = await b.run(views.topic, b.admin, request.path_params["name"], await b.features())
    return await page(request, "topic.html", t=data, nav="topics", created=request.query_params.get("created"),
                      done=request.query_params.get("done"), result=request.query_params.get("result"))


async def change_topic(request: Request) -> Response:
    b = backend_of(request)
    name = request.path_params["name"]
    form = await mutation_form(request)
    change = await b.run(views.plan_topic_change, b.admin, name, form)
    if not confirmed(form):
        titles = {"set-config": "Change a config of", "delete-config": "Remove a config override of",
                  "add-partitions": "Add partitions to", "delete-records": "Delete records of", "delete-topic": "Delete topic"}
        return await confirm_page(request, form, f"{titles[change.action]} {name}?", list(change.summary),
                                  danger=change.action in ("delete-records", "delete-topic"))
    await b.run(views.apply_topic_change, b.admin, change)
    if change.action == "delete-topic":
        return RedirectResponse("/topics?deleted=" + quote(name, safe=""), status_code=303)
    return RedirectResponse(f"/topics/{quote(name, safe='')}?done={change.action}", status_code=303)


async def messages(request: Request) -> Response:
    b = backend_of(request)
    name = request.path_params["name"]
    qp = request.query_params
    partition = views.parse_int(qp.get("partition") or "0", "partition", minimum=0)
    offset = views.parse_int(qp["offset"], "offset", minimum=0) if qp.get("offset", "").strip() else None
    timestamp = views.parse_timestamp(qp["timestamp"]) if qp.get("timestamp", "").strip() else None
    limit = views.parse_int(qp.get("limit") or "50", "limit", minimum=1)
    order = qp.get("order") or "newest"
    if order not in ("newest", "oldest"):
        raise UserError(f"The order must be newest or oldest, got {order!r}.")
    data = await b.run(views.messages, b.admin, b.fetcher, name, partition, offset=offset, timestamp=timestamp,
                       newest_first=order == "newest", limit=limit, needle=qp.get("filter", ""))
    return await page(request, "messages.html", m=data, nav="topics", order=order, limit=limit,
                      offset=qp.get("offset", ""), timestamp=qp.get("timestamp", ""), needle=qp.get("filter", ""),
                      produced=qp.get("produced"))


async def produce(request: Request) -> Response:
    b = backend_of(request)
    name = request.path_params["name"]
    form = await mutation_form(request)
    part_text = str(form.get("partition", "")).strip()
    partition = views.parse_int(part_text, "partition", minimum=0) if part_text else None
    key, value, headers = str(form.get("key", "")), str(form.get("value", "")), str(form.get("headers", ""))
    await b.run(views.describe_topic, b.admin, name)
    if not confirmed(form):
        return await confirm_page(request, form, f"Produce a record to {name}?", [
            ("Topic", name), ("Partition", partition if partition is not None else "by key / sticky"),
            ("Key", key or "null"), ("Value", value), ("Headers", headers or "-")])
    await run_in_threadpool(views.produce, b.bootstrap, b.security, name, partition, key, value, headers)
    target = {"partition": partition or 0, "order": "newest", "produced": "1"}
    return RedirectResponse(f"/topics/{quote(name, safe='')}/messages?{urlencode(target)}", status_code=303)


async def groups(request: Request) -> Response:
    b = backend_of(request)
    rows = await b.run(views.groups, b.admin)
    return await page(request, "groups.html", groups=rows, nav="groups")


async def group(request: Request) -> Response:
    b = backend_of(request)
    data = await b.run(lambda: views.group(b.admin, request.path_params["group"], b.lag_history, time.monotonic()))
    return await page(request, "group.html", g=data, nav="groups", done=request.query_params.get("done"))


async def reset_group(request: Request) -> Response:
    b = backend_of(request)
    gid = request.path_params["group"]
    form = await mutation_form(request)
    plan = await b.run(views.plan_reset, b.admin, gid, str(form.get("target", "")), str(form.get("value", "")),
                       str(form.get("topic", "")).strip())
    if not confirmed(form):
        return await page(request, "reset.html", plan=plan, nav="groups",
                          fields=[(k, v) for k, v in form.multi_items() if k not in ("csrf", "confirmed")])
    await b.run(views.execute_reset, b.admin, plan)
    return RedirectResponse(f"/groups/{quote(gid, safe='')}?done=reset", status_code=303)


async def delete_group(request: Request) -> Response:
    b = backend_of(request)
    gid = request.path_params["group"]
    form = await mutation_form(request)
    if not confirmed(form):
        return await confirm_page(request, form, f"Delete consumer group {gid}?",
                                  [("Group", gid), ("Effect", "its committed offsets are deleted too")], danger=True)
    await b.run(views.delete_group, b.admin, gid)
    return RedirectResponse("/groups?deleted=" + quote(gid, safe=""), status_code=303)


async def require(request: Request, feature: str, what: str) -> Backend:
    """The backend, if the cluster answers what the page needs (kavka-only and recent-Kafka pages)."""
    b = backend_of(request)
    if not (await b.features()).get(feature):
        raise UserError(f"This cluster does not answer {what}: no {feature.capitalize()} page.", 404)
    return b


DISKS_API = "DescribeLogDirs v4 and AlterReplicaLogDirs"
REASSIGN_API = "AlterPartitionReassignments and ListPartitionReassignments (KIP-455)"


async def disks(request: Request) -> Response:
    b = await require(request, "disks", DISKS_API)
    data = await b.run(moves.disks, b.admin)
    return await page(request, "disks.html", d=data, nav="disks", done=request.query_params.get("done"))


async def move_replica(request: Request) -> Response:
    b = await require(request, "disks", DISKS_API)
    form = await mutation_form(request)
    mv = await b.run(moves.plan_dir_move, b.admin, form)
    if not confirmed(form):
        return await confirm_page(request, form, f"Move {mv.topic}-{mv.partition} on broker {mv.broker}?", [
            ("Replica", f"{mv.topic}-{mv.partition} on broker {mv.broker}"), ("From", mv.source), ("To", mv.destination),
            ("How", "copied live into the new dir, then swapped in; producers and consumers see nothing")])
    await b.run(moves.execute_dir_move, b.admin, mv)
    return RedirectResponse("/disks?done=move", status_code=303)


async def move_throttle(request: Request) -> Response:
    b = await require(request, "disks", DISKS_API)
    form = await mutation_form(request)
    broker, rate = moves.parse_throttle(form)
    if not confirmed(form):
        return await confirm_page(request, form, f"Change the move throttle of broker {broker}?", [
            ("Broker", broker), ("replica.alter.log.dirs.io.max.bytes.per.second",
                                 f"{rate} B/s" if rate is not None else "none (remove the throttle)")])
    await b.run(moves.set_move_throttle, b.admin, broker, rate)
    return RedirectResponse("/disks?done=throttle", status_code=303)


async def balance_disks(request: Request) -> Response:
    b = await require(request, "disks", DISKS_API)
    form = await mutation_form(request)
    broker = views.parse_int(form.get("broker", ""), "broker", minimum=0)
    if not confirmed(form):
        plan = await b.run(moves.plan_disk_balance, b.admin, broker)
        return await page(request, "balance.html", plan=plan, nav="disks")
    await b.run(moves.execute_disk_balance, b.admin, moves.reviewed_balance(broker, form))
    return RedirectResponse("/disks?done=balance", status_code=303)


async def reassignments(request: Request) -> Response:
    b = await require(request, "reassignments", REASSIGN_API)
    data = await b.run(moves.reassignments, b.admin)
    return await page(request, "reassignments.html", r=data, nav="reassignments", done=request.query_params.get("done"))


async def plan_reassignment(request: Request) -> Response:
    """The review page of a plan (the minimal-move planner's, or one partition's); its confirm
    executes exactly the targets shown."""
    b = await require(request, "reassignments", REASSIGN_API)
    form = await mutation_form(request)
    additional = form.get("additional") == "1"
    if confirmed(form):
        plan = await b.run(moves.reviewed_targets, b.admin, form)
        await b.run(moves.execute_reassignment, b.admin, plan, additional=additional)
        return RedirectResponse("/reassignments?done=started", status_code=303)
    if form.get("kind") == "partition":
        plan = await b.run(moves.plan_partition_move, b.admin, form)
    else:
        plan = await b.run(moves.plan_rebalance, b.admin, form)
    return await page(request, "plan.html", plan=plan, nav="reassignments", additional=additional,
                      kind=form.get("kind") or "rebalance")


async def cancel_reassignment(request: Request) -> Response:
    b = await require(request, "reassignments", REASSIGN_API)
    form = await mutation_form(request)
    tps = form.getlist("tp")
    if not confirmed(form):
        return await confirm_page(request, form, "Cancel reassignment?", [
            ("Partitions", ", ".join(map(str, tps)) or "every reassignment in progress"),
            ("Effect", "each partition goes back to its original replicas; the throttles are cleared")], danger=True)
    await b.run(moves.cancel, b.admin, form)
    return RedirectResponse("/reassignments?done=cancelled", status_code=303)


async def clear_reassignment_throttles(request: Request) -> Response:
    b = await require(request, "reassignments", REASSIGN_API)
    form = await mutation_form(request)
    if not confirmed(form):
        return await confirm_page(request, form, "Clear the replication throttles?", [
            ("Effect", "the brokers' leader/follower throttled rates and the topics' throttled replicas are removed")])
    await b.run(moves.clear_reassignment_throttles, b.admin)
    return RedirectResponse("/reassignments?done=throttles-cleared", status_code=303)


async def tiered(request: Request) -> Response:
    b = await require(request, "tiered", "ListOffsets v9 (KIP-1005)")
    feats = await b.features()
    rows, quota = await b.run(lambda: (views.tiered(b.admin), views.remote_fetch_quota(b.admin, feats, b.metrics_urls)))
    return await page(request, "tiered.html", topics=rows, quota=quota, nav="tiered")


async def elect_leaders(request: Request) -> Response:
    b = await require(request, "elections", "ElectLeaders")
    name = request.path_params["name"]
    form = await mutation_form(request)
    kind, partitions = await b.run(moves.plan_election, b.admin, name, form)
    if not confirmed(form):
        return await confirm_page(request, form, f"Elect {kind} leaders of {name}?", [
            ("Partitions", ", ".join(f"{t}-{p}" for t, p in partitions)),
            ("Election", "the preferred replica (the first) becomes leader where it is in the ISR" if kind == "preferred"
             else "a live replica out of the ISR may become leader where there is none: acknowledged records can be lost")],
            danger=kind == "unclean")
    result = await b.run(moves.elect, b.admin, kind, partitions)
    return RedirectResponse(f"/topics/{quote(name, safe='')}?" + urlencode({"done": "election", "result": result}), status_code=303)


# ---------------------------------------------------------------------- log-in mode


def safe_next(target: str) -> str:
    """Where to go after the log-in: a path of this console only (never another site)."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"


async def login(request: Request) -> Response:
    sessions: Sessions | None = request.app.state.sessions
    if sessions is None:
        raise UserError("This console does not ask for a log-in: it uses its own credentials (--command-config).", 404)
    if request.method == "GET":
        return await page(request, "login.html", nav=None, next=safe_next(request.query_params.get("next", "/")),
                          mechanism=sessions.base.mechanism, error=None)
    form = await checked_form(request)
    username, password = str(form.get("username", "")).strip(), str(form.get("password", ""))
    target = safe_next(str(form.get("next", "/")))
    if not username or not password:
        return await page(request, "login.html", status=400, nav=None, next=target, mechanism=sessions.base.mechanism,
                          error="Enter a user name and a password.")
    try:
        sid = await run_in_threadpool(sessions.login, username, password)
    except KafkaConnectionError as e:
        log.warning("console: log-in of %r refused", username)
        return await page(request, "login.html", status=401, nav=None, next=target, mechanism=sessions.base.mechanism,
                          error=f"Log-in refused: {e}")
    old = request.cookies.get(SESSION_COOKIE)
    if old:
        sessions.logout(old)
    resp = RedirectResponse(target, status_code=303)
    resp.set_cookie(SESSION_COOKIE, sid, httponly=True, samesite="strict", path="/")
    return resp


async def logout(request: Request) -> Response:
    sessions: Sessions | None = request.app.state.sessions
    await checked_form(request)
    if sessions is not None:
        sessions.logout(request.cookies.get(SESSION_COOKIE))
    resp = RedirectResponse("/login", status_code=303)
    resp.delete_cookie(SESSION_COOKIE, path="/")
    return resp


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


# ---------------------------------------------------------------------- errors


async def on_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, UserError):
        status, message = exc.status, str(exc)
    elif isinstance(exc, HTTPException):
        status, message = exc.status_code, "No such page." if exc.status_code == 404 else str(exc.detail)
    elif isinstance(exc, KafkaConnectionError):
        status, message = 503, f"Cannot reach the cluster: {exc}"
    elif isinstance(exc, KafkaError):
        status, message = 409, f"The cluster refused: {exc}"
    elif isinstance(exc, KafkaProtocolError):
        status, message = 502, f"The cluster does not support this: {exc}"
    else:
        log.error("console: unexpected error on %s %s\n%s", request.method, request.url.path,
                  "".join(traceback.format_exception(exc)))
        status, message = 500, f"Unexpected error ({type(exc).__name__}): {exc}. Details are in the console's log."
    try:
        return await page(request, "error.html", status=status, message=message, nav=None)
    except Exception:  # the page itself failed: plain text, still no stack trace
        return PlainTextResponse(message, status_code=status)


def guarded(fn: Callable[[Request], Any]) -> Callable[[Request], Any]:
    """Every route's errors become a page (the handler, not the server, answers them)."""

    async def route(request: Request) -> Response:
        try:
            return await fn(request)
        except LoginRequired:
            if request.method == "GET":
                return RedirectResponse("/login?" + urlencode({"next": request.url.path + (
                    "?" + request.url.query if request.url.query else "")}), status_code=303)
            return await on_error(request, UserError("Log in first: this console acts as each user.", 401))
        except Exception as e:
            return await on_error(request, e)

    route.__name__ = fn.__name__
    return route


def create_app(bootstrap: str, *, security: ClientSecurity = PLAINTEXT, read_only: bool = False,
               metrics_urls: dict[int, str] | None = None) -> Starlette:
    """The console for ``bootstrap``. A SASL ``security`` without credentials (no SASL client)
    means log-in mode: each user logs in with their own. ``metrics_urls`` names brokers'
    Prometheus endpoints the console cannot learn from their configs (--metrics-url)."""
    routes = [
        Route("/login", guarded(login), methods=["GET", "POST"]),
        Route("/logout", guarded(logout), methods=["POST"]),
        Route("/", guarded(overview)),
        Route("/topics", guarded(topics)),
        Route("/topics/create", guarded(create_topic), methods=["POST"]),
        Route("/topics/{name}", guarded(topic)),
        Route("/topics/{name}/change", guarded(change_topic), methods=["POST"]),
        Route("/topics/{name}/messages", guarded(messages)),
        Route("/topics/{name}/produce", guarded(produce), methods=["POST"]),
        Route("/groups", guarded(groups)),
        Route("/groups/{group}", guarded(group)),
        Route("/groups/{group}/reset", guarded(reset_group), methods=["POST"]),
        Route("/groups/{group}/delete", guarded(delete_group), methods=["POST"]),
        Route("/disks", guarded(disks)),
        Route("/disks/move", guarded(move_replica), methods=["POST"]),
        Route("/disks/throttle", guarded(move_throttle), methods=["POST"]),
        Route("/disks/balance", guarded(balance_disks), methods=["POST"]),
        Route("/reassignments", guarded(reassignments)),
        Route("/reassignments/plan", guarded(plan_reassignment), methods=["POST"]),
        Route("/reassignments/cancel", guarded(cancel_reassignment), methods=["POST"]),
        Route("/reassignments/clear-throttles", guarded(clear_reassignment_throttles), methods=["POST"]),
        Route("/topics/{name}/elect", guarded(elect_leaders), methods=["POST"]),
        Route("/tiered", guarded(tiered)),
        Route("/healthz", healthz),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: on_error})
    app.state.bootstrap, app.state.read_only = bootstrap, read_only
    if security.protocol.startswith("SASL_") and security.sasl is None:
        app.state.sessions, app.state.backend = Sessions(bootstrap, security, read_only, metrics_urls or {}), None
    else:
        app.state.sessions, app.state.backend = None, Backend(bootstrap, security=security, read_only=read_only,
                                                              metrics_urls=metrics_urls)
    return app
