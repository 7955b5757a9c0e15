"""Signed action links for notices: approve, reject or open a review item from an email or a chat message.

A link names one item and one action, signed with the site's SECRET_KEY (django.core.signing, its own
salt) and stamped, so it cannot be forged, pointed at another item or action, or used after
STEADYFLOW_ACTION_LINK_TTL_S. A plain link grants nothing by itself: following it asks the approver to log in
(if not already) and to confirm on a minimal page, where the same rules as the inbox apply
(workflows/operators/review.py: the decide permission, the human task's assignee group and form fields, the
four-eyes rule). A decision applies once — the item is decided under its lock — so a link used
again, or after someone decided in the inbox, says who decided instead.

An email channel with an `approver_group` names its recipients approvers for that group: their
approve and reject links are each bound to one recipient and that channel, and decide without an
account once confirmed — as long as the channel still lists the recipient, still names that group, and
the item is one that group decides. The decision is recorded (item, audit, event) as the recipient's
`email:<address>` user, which cannot log in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing

SALT = "steadyflow.review-action-link"
ACTIONS = ("approve", "reject", "open")


class LinkInvalid(Exception):
    """A link that was tampered with, expired, or names no known action; the message says which."""


@dataclass(frozen=True)
class ActionLink:
    item_id: int
    action: str
    # An emailed approver's link: bound to the recipient and the channel that named them an approver
    # (NotificationChannel.approver_group); it decides without an account.
    recipient: str = ""
    channel_id: int | None = None


def token_for(item_id: int, action: str, recipient: str = "", channel_id: int | None = None) -> str:
    if action not in ACTIONS:
        raise ValueError(f"unknown link action {action!r}")
    payload: list[object] = [item_id, action] + ([recipient, channel_id] if recipient else [])
    return str(signing.dumps(payload, salt=SALT, compress=True))


def path_for(item_id: int, action: str, recipient: str = "", channel_id: int | None = None) -> str:
    return f"/review/act/{token_for(item_id, action, recipient, channel_id)}/"


def read(token: str) -> ActionLink:
    try:
        payload = signing.loads(token, salt=SALT, max_age=settings.STEADYFLOW["ACTION_LINK_TTL_S"])
    except signing.SignatureExpired:
        raise LinkInvalid("this link has expired: open the item from the review inbox instead") from None
    except (signing.BadSignature, ValueError, TypeError):
        raise LinkInvalid("this link is not valid (it was changed or cut short)") from None
    if not isinstance(payload, list) or len(payload) not in (2, 4):
        raise LinkInvalid("this link is not valid (it names no known action)")
    item_id, action = payload[0], payload[1]
    recipient, channel_id = (payload[2], payload[3]) if len(payload) == 4 else ("", None)
    if (not isinstance(item_id, int) or action not in ACTIONS or not isinstance(recipient, str)
            or (recipient and (not isinstance(channel_id, int) or action == "open"))):
        raise LinkInvalid("this link is not valid (it names no known action)")
    return ActionLink(item_id, action, recipient, channel_id)


def emailed_refusal(link: ActionLink, assignee_group: str) -> str | None:
    """Why an emailed approver's link may not decide an item of `assignee_group` (None when it may): the
    channel must still list the recipient as an approver for the group that decides the item."""
    from workflows.triggers.models import ChannelKind, NotificationChannel

    channel = NotificationChannel.objects.filter(pk=link.channel_id, kind=ChannelKind.EMAIL, enabled=True).first()
    if channel is None or not channel.approver_group:
        return "this link's channel no longer lets its recipients decide: open the item in Steadyflow"
    if link.recipient not in channel.recipients():
        return "you are no longer a recipient of this channel: open the item in Steadyflow"
    if (assignee_group or "operators") != channel.approver_group:
        return f"this item is for the group '{assignee_group or 'operators'}': open it in Steadyflow"
    return None


def approver_user(recipient: str) -> Any:
    """The user an emailed approver's decisions are recorded as: `email:<address>`, which cannot log in."""
    from django.contrib.auth import get_user_model

    user, created = get_user_model().objects.get_or_create(
        username=f"email:{recipient}"[:150], defaults={"email": recipient, "is_active": False})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user
