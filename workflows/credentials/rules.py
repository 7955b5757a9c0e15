"""Rules about credentials that the model itself enforces (Credential.save), kept in a leaf so
workflows/models.py need not import the store (which imports the models)."""

from __future__ import annotations


class CredentialError(ValueError):
    """A credential that cannot be saved as given (the message names the field)."""


DESTINATION_CHANGED = ("its {what} changed: enter the value again (a stored value is never sent somewhere new "
                       "without it)")


def destination_change(old_kind: str, old_url: str, new_kind: str, new_url: str) -> str | None:
    """What changed about where a credential is sent (its kind, its base URL), or None. Such a change
    needs the value typed again: otherwise whoever may edit it could point someone else's key at a
    server of their own."""
    changed = [what for what, old, new in (("kind", old_kind, new_kind), ("base URL", old_url or "", new_url or ""))
               if old != new]
    return DESTINATION_CHANGED.format(what=" and ".join(changed)) if changed else None


__all__ = ["DESTINATION_CHANGED", "CredentialError", "destination_change"]
