"""Signed action links for notices: approve, reject or open a review item from an email or a chat message.

A link names one item and one action, signed with the site's SECRET_KEY (django.core.signing, its own
salt) and stamped, so it cannot be forged, pointed at another item or action, or used after
STEADYFLOW_ACTION_LINK_TTL_S. It grants nothing by itself: following it asks the approver to log in
(if not already) and to confirm on a minimal page, where the same rules as the inbox apply
(workflows/operators/review.py: the decide permission, the human task's assignee group and form fields, the
four-eyes rule). A decision applies once — the item is decided under its lock — so a link used
again, or after someone decided in the inbox, says who decided instead.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def token_for(item_id: int, action: str) -> str:
    if action not in ACTIONS:
        raise ValueError(f"unknown link action {action!r}")
    return str(signing.dumps([item_id, action], salt=SALT, compress=True))


def path_for(item_id: int, action: str) -> str:
    return f"/review/act/{token_for(item_id, action)}/"


def read(token: str) -> ActionLink:
    try:
        item_id, action = signing.loads(token, salt=SALT, max_age=settings.STEADYFLOW["ACTION_LINK_TTL_S"])
    except signing.SignatureExpired:
        raise LinkInvalid("this link has expired: open the item from the review inbox instead") from None
    except (signing.BadSignature, ValueError, TypeError):
        raise LinkInvalid("this link is not valid (it was changed or cut short)") from None
    if not isinstance(item_id, int) or action not in ACTIONS:
        raise LinkInvalid("this link is not valid (it names no known action)")
    return ActionLink(item_id, action)
