"""E-mail backends for tests: a real backend interface whose server misbehaves on purpose."""

from __future__ import annotations

import smtplib

from django.core import mail
from django.core.mail.backends.locmem import EmailBackend as LocmemBackend


class FlakySMTPBackend(LocmemBackend):
    """Fails the first `failures_left` sends with an SMTP error, then delivers to mail.outbox."""

    failures_left = 0

    def send_messages(self, messages):
        if FlakySMTPBackend.failures_left > 0:
            FlakySMTPBackend.failures_left -= 1
            raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")
        return super().send_messages(messages)


__all__ = ["FlakySMTPBackend", "mail"]
