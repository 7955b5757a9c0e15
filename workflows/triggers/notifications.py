"""Notices when an instance halts into review, fails, or waits on a human task.

The runtime calls `after_commit_notices(unit)` for every unit a store writes (a commit hook, registered
by workflows/apps.py; runtime/effects.py); it looks only at what the unit recorded (new review items,
a failed status) and, when there is something to tell, registers an on-commit effect. Nothing
happens inside the hot path's transaction: after COMMIT, one delivery row per subscribed channel is
inserted (cheap, rare) and a job on the `default` queue attempts them. A delivery that fails is
retried with exponential backoff by the scheduler loop (`retry_due`, also the safety net when Redis
was away at enqueue time), with one DeliveryAttempt row per attempt (status code or error, next
attempt).

Outgoing webhooks go through the guarded outbound client (STEADYFLOW_HTTP_ALLOWLIST for private
targets) and are signed like incoming ones (workflows/triggers/signing.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Q

from workflows import clock
from workflows.engine import outbound
from workflows.engine.errors import StepError
from workflows.engine.statuses import InstanceStatus
from workflows.triggers import action_links, signing
from workflows.triggers.models import (
    ChannelKind,
    DeliveryAttempt,
    DeliveryStatus,
    NotificationChannel,
    NotificationDelivery,
)

log = logging.getLogger("steadyflow.notifications")
Notice = tuple[str, int, Any]  # (event, instance id, review item object or None)
JOB = "workflows.triggers.notifications.deliver_pending"
EVENT_WORDS = {"review": "halted into review", "failed": "failed", "human_task": "is waiting on a human task"}


def conf(name: str) -> Any:
    return settings.STEADYFLOW[name]


def notices_of(unit: Any) -> list[Notice]:
    """What a unit of work has to tell: its new review items and a failure. Reads memory only."""
    notices: list[Notice] = []
    for item in unit.new_reviews:
        notices.append(("human_task" if item.reason == "human_task" else "review", unit.instance.pk, item))
    if "status" in unit.instance_fields and unit.instance.status == InstanceStatus.FAILED:
        notices.append(("failed", unit.instance.pk, None))
    return notices


def after_commit_notices(unit: Any, on_commit: Callable[[Callable[[], object]], None]) -> None:
    notices = notices_of(unit)
    if notices:
        on_commit(lambda: notify(notices))


def notify(notices: list[Notice], now: datetime | None = None) -> int:
    """After COMMIT: a delivery row per subscribed channel and notice, then a job to send them.
    Never raises (a notice is not worth failing the caller's step for)."""
    try:
        made = create_deliveries(notices, now or clock.now())
        if made:
            enqueue()
        return made
    except Exception:  # noqa: BLE001 - rows not made are logged; the run itself is unaffected
        log.exception("could not record notifications")
        return 0


def create_deliveries(notices: list[Notice], now: datetime) -> int:
    channels = list(NotificationChannel.objects.filter(enabled=True))
    rows = []
    for event, instance_id, item in notices:
        review_id = item.pk if item is not None else None
        payload = notice_payload(event, instance_id, review_id, item, now)
        for channel in channels:
            if event in (channel.events or []):
                rows.append(NotificationDelivery(channel=channel, event=event, instance_id=instance_id,
                                                 review_id=review_id, payload=payload, next_attempt_at=now,
                                                 created_at=now))
    NotificationDelivery.objects.bulk_create(rows)
    return len(rows)


def enqueue() -> None:
    import django_rq

    try:
        django_rq.get_queue("default").enqueue(JOB, result_ttl=0, failure_ttl=86400)
    except Exception as exc:  # noqa: BLE001 - Redis away: the scheduler's retry_due sends them
        log.warning("could not enqueue notifications: %s (the scheduler will send them)", exc)


def absolute(path: str) -> str:
    base: str = conf("BASE_URL")
    return base.rstrip("/") + path


def notice_payload(event: str, instance_id: int, review_id: int | None, item: Any, now: datetime) -> dict[str, Any]:
    from workflows.models import WorkflowInstance

    instance = WorkflowInstance.objects.select_related("version__definition").get(pk=instance_id)
    link = absolute(f"/review/{review_id}/" if review_id else f"/instances/{instance_id}/")
    return {
        "event": event, "instance": instance_id, "review": review_id,
        "workflow": instance.version.definition.slug, "status": str(instance.status),
        "reason": (item.reason if item is not None else instance.halt_reason) or "",
        "node": (item.node_id if item is not None else ""), "url": link,
        "instance_url": absolute(f"/instances/{instance_id}/"), "at": now.isoformat(),
        # One signed link per action (action_links.py): each asks the approver to confirm after login.
        **({"actions": {action: absolute(action_links.path_for(review_id, action)) for action in action_links.ACTIONS}}
           if review_id and event in ("review", "human_task") else {}),
    }


# --- Sending ----------------------------------------------------------------------------------------

def deliver_pending(now: datetime | None = None) -> int:
    """The job: attempt every delivery that is due. Returns how many were delivered."""
    return retry_due(now or clock.now())


def retry_due(now: datetime, limit: int = 50) -> int:
    delivered = 0
    due = NotificationDelivery.objects.filter(status=DeliveryStatus.PENDING).filter(
        Q(next_attempt_at__lte=now) | Q(next_attempt_at__isnull=True)).order_by("next_attempt_at")
    for delivery in list(due.select_related("channel")[:limit]):
        # Claimed by a conditional update: of two processes seeing it due, one sends it.
        lease = now + timedelta(seconds=conf("NOTIFY_TIMEOUT_S") * 2 + 5)
        claimed = NotificationDelivery.objects.filter(
            pk=delivery.pk, status=DeliveryStatus.PENDING, next_attempt_at=delivery.next_attempt_at,
            attempts=delivery.attempts).update(next_attempt_at=lease)
        if claimed:
            delivered += attempt(delivery, now)
    return delivered


def backoff(number: int) -> timedelta:
    base: float = conf("NOTIFY_BACKOFF_S")
    return timedelta(seconds=min(base * 2 ** (number - 1), 3600.0))


def attempt(delivery: NotificationDelivery, now: datetime) -> int:
    number = delivery.attempts + 1
    code, error = send(delivery, now)
    ok = error == "" and code is not None and 200 <= code < 300
    gave_up = not ok and number >= conf("NOTIFY_MAX_ATTEMPTS")
    next_at = None if ok or gave_up else now + backoff(number)
    DeliveryAttempt.objects.create(delivery=delivery, number=number, status_code=code, ok=ok, error=error[:300],
                                   next_attempt_at=next_at, created_at=now)
    status = DeliveryStatus.DELIVERED if ok else DeliveryStatus.GAVE_UP if gave_up else DeliveryStatus.PENDING
    NotificationDelivery.objects.filter(pk=delivery.pk).update(attempts=number, status=status,
                                                                next_attempt_at=next_at)
    return 1 if ok else 0


def send(delivery: NotificationDelivery, now: datetime) -> tuple[int | None, str]:
    """(response code, error): a 2xx code and "" when it went out."""
    channel = delivery.channel
    try:
        if channel.kind == ChannelKind.EMAIL:
            send_email(channel, delivery.payload)
            return 250, ""
        if channel.kind == ChannelKind.SLACK:
            return send_slack(channel, delivery)
        return send_webhook(channel, delivery, now)
    except Exception as exc:  # noqa: BLE001 - every failure is an attempt to log and retry
        return None, f"{type(exc).__name__}: {exc}"


def send_email(channel: NotificationChannel, payload: dict[str, Any]) -> None:
    what = EVENT_WORDS.get(payload["event"], payload["event"])
    subject = f"[Steadyflow] {payload['workflow']} instance {payload['instance']} {what}"
    lines = [f"Workflow {payload['workflow']}, instance {payload['instance']} {what}.",
             f"Reason: {payload['reason'] or '-'}"]
    if payload.get("node"):
        lines.append(f"Node: {payload['node']}")
    lines += ["", f"Open it: {payload['url']}"]
    actions = payload.get("actions") or {}
    if actions and channel.approver_group and payload.get("review"):
        # Approvers without an account: each recipient gets links bound to them (one mail each).
        for recipient in channel.recipients():
            own = [absolute(action_links.path_for(int(payload["review"]), action, recipient, channel.pk))
                   for action in ("approve", "reject")]
            body = lines + ["", "Or decide from here (one click, then confirm; the link is yours alone):",
                            f"  Approve: {own[0]}", f"  Reject:  {own[1]}"]
            send_mail(subject, "\n".join(body), None, [recipient])
        return
    if actions:
        lines += ["", "Or decide from here (you confirm on the page after logging in):",
                  f"  Approve: {actions['approve']}", f"  Reject:  {actions['reject']}"]
    send_mail(subject, "\n".join(lines), None, channel.recipients())


def slack_message(payload: dict[str, Any]) -> dict[str, Any]:
    """A Slack-compatible incoming-webhook message (also read by Mattermost, Rocket.Chat, Discord's
    /slack endpoint): a line of text for clients without blocks, then the facts and link buttons."""
    what = EVENT_WORDS.get(payload["event"], payload["event"])
    text = f"{payload['workflow']} instance {payload['instance']} {what}"
    node = f" · Node: `{payload['node']}`" if payload.get("node") else ""
    facts = f"*{text}*\nReason: {payload['reason'] or '-'}{node}"
    actions = payload.get("actions") or {}
    buttons = [{"type": "button", "text": {"type": "plain_text", "text": label}, "url": url, **style}
               for label, url, style in (("Approve", actions.get("approve"), {"style": "primary"}),
                                         ("Reject", actions.get("reject"), {"style": "danger"}),
                                         ("Open", actions.get("open") or payload["url"], {})) if url]
    return {"text": f"[Steadyflow] {text}: {payload['url']}",
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": facts}},
                       {"type": "actions", "elements": buttons}]}


def send_slack(channel: NotificationChannel, delivery: NotificationDelivery) -> tuple[int | None, str]:
    """POST the message to the channel's incoming-webhook URL (its secret is in the URL itself)."""
    body = json.dumps(slack_message(delivery.payload)).encode()
    return post(channel.target, body, {"Content-Type": "application/json"})


def send_webhook(channel: NotificationChannel, delivery: NotificationDelivery, now: datetime) -> tuple[int | None, str]:
    body = json.dumps(delivery.payload, sort_keys=True).encode()
    delivery_id = f"notification-{delivery.pk}"
    headers = {"Content-Type": "application/json",
               signing.HEADER: signing.header_value([channel.secret], int(now.timestamp()), body, delivery_id),
               signing.DELIVERY_HEADER: delivery_id,
               "Steadyflow-Event": delivery.event}
    return post(channel.target, body, headers)


def post(target: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
    """One delivery through the guarded outbound client: (status, "") when a 2xx came back."""
    try:
        reply = outbound.request("POST", target, content=body, headers=headers,
                                 policy=outbound.Policy(allowlist=tuple(conf("HTTP_ALLOWLIST"))),
                                 timeout_s=conf("NOTIFY_TIMEOUT_S"), max_bytes=64 * 1024)
    except StepError as exc:  # blocked, deadline, transport, too large
        return None, f"{type(exc).__name__}: {exc}"
    if 200 <= reply.status < 300:
        return reply.status, ""
    return reply.status, f"HTTP {reply.status}"


KICKED_AT: list[float] = [0.0]  # when this process last enqueued for due retries
KICK_EVERY_S = 5.0


def kick_due(now: datetime) -> bool:
    """The scheduler loop's part: when deliveries are due (a retry's backoff passed, or the enqueue
    after COMMIT failed), enqueue the job that sends them, at most every KICK_EVERY_S."""
    if now.timestamp() - KICKED_AT[0] < KICK_EVERY_S:
        return False
    due = NotificationDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now).exists()
    if due:
        KICKED_AT[0] = now.timestamp()
        enqueue()
    return bool(due)
