"""Triggers (signed incoming webhooks, cron schedules) and notifications (email and signed outgoing
webhooks when an instance halts into review, fails or waits on a human task).

models.py holds the rows (imported by workflows.models, so they belong to the `workflows` app);
signing.py the HMAC scheme both directions share; mapping.py the payload-to-input mapping;
webhooks.py, schedules.py and notifications.py the behaviour.
"""
