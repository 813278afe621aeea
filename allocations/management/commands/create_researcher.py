"""Create a local researcher account (no staff rights), for sites without single sign-on."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_email
from django.db import transaction


class Command(BaseCommand):
    help = (
        "Create a researcher account that can sign in and submit allocation requests. Without "
        "--password a random password is generated and printed once. See docs/accounts.md."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--email", required=True, help="Where request e-mails go.")
        parser.add_argument("--first-name", default="")
        parser.add_argument("--last-name", default="")
        parser.add_argument(
            "--password",
            default="",
            help="Leave out to generate one (safer than a password in the shell history).",
        )

    def handle(
        self,
        *args,
        username: str,
        email: str,
        first_name: str,
        last_name: str,
        password: str,
        **options,
    ):
        user_model = get_user_model()
        username = username.strip()
        problems = []
        username_field = user_model._meta.get_field(user_model.USERNAME_FIELD)
        try:
            username_field.clean(username, None)
        except ValidationError as exc:
            problems.append(f"username: {' '.join(exc.messages)}")
        try:
            validate_email(email)
        except ValidationError:
            problems.append(f"email: {email!r} is not an e-mail address.")
        for label, value in (("first name", first_name), ("last name", last_name)):
            if len(value) > 150 or any(ord(ch) < 32 for ch in value):
                problems.append(f"{label}: at most 150 characters, no control characters.")
        if user_model.objects.filter(**{f"{user_model.USERNAME_FIELD}__iexact": username}).exists():
            problems.append(f"username: an account called {username!r} already exists.")
        generated = not password
        password = password or secrets.token_urlsafe(12)
        candidate = user_model(
            username=username, email=email, first_name=first_name, last_name=last_name
        )
        try:
            validate_password(password, user=candidate)
        except ValidationError as exc:
            problems.append(f"password: {' '.join(exc.messages)}")
        if problems:
            raise CommandError("Nothing was created. " + " ".join(problems))
        with transaction.atomic():
            user = user_model.objects.create_user(
                username=username,
                email=email,
                password=password,
                first_name=first_name,
                last_name=last_name,
            )
        self.stdout.write(f"Created researcher account {user.get_username()!r} ({email}).")
        if generated:
            self.stdout.write(
                f"Password: {password}\nGive it to the researcher; they can change it at "
                "/accounts/password_change/ after signing in."
            )
