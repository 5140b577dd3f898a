# The muarl image: the API, worker, beat and local model server all run from it (docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 MUARL_VAR_DIR=/var/lib/muarl
WORKDIR /app

# CPU torch (the default index's build bundles CUDA); the rest from PyPI
COPY pyproject.toml README.md alembic.ini ./
COPY backend ./backend
COPY rl ./rl
COPY migrations ./migrations
# editable: alembic.ini and migrations/ are read from /app
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu -e '.[train]' \
    && useradd --create-home --uid 1000 muarl \
    && mkdir -p /var/lib/muarl && chown muarl /var/lib/muarl

USER muarl
EXPOSE 8000 8001
CMD ["muarl", "serve", "--host", "0.0.0.0", "--port", "8000"]
