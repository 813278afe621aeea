"""The WSGI application bench/page_throughput.py serves: the project plus one bare view."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.conf import settings  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

settings.ROOT_URLCONF = "page_urls"
application = get_wsgi_application()
