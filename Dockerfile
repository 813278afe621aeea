# One image for the web server and the Celery worker (docker-compose.yml picks the command).
FROM python:3.12-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
RUN useradd --create-home --uid 1000 app

COPY pyproject.toml README.md ./
COPY config ./config
COPY advisor ./advisor
COPY catalog ./catalog
COPY catalog_schema ./catalog_schema
COPY allocations ./allocations
COPY web ./web
RUN pip install .

COPY . .
# collectstatic needs a secret only to import settings; the real one comes from the environment.
RUN DJANGO_DEBUG=false DJANGO_SECRET_KEY=collectstatic-only-not-a-real-secret \
    python manage.py collectstatic --noinput

USER app
EXPOSE 8000
CMD ["bin/start-web"]
