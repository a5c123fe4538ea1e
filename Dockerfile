# Slim, non-root image running `approval-bot serve` (HTTP on 3000, or Socket Mode with SLACK_APP_TOKEN).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY agent_runtime ./agent_runtime
COPY store ./store
RUN pip install . && useradd --create-home --uid 10001 bot && mkdir -p /data && chown bot /data

USER bot
WORKDIR /data
ENV DATABASE_URL=sqlite:////data/approval-bot.db WORKSPACE_DIR=/data/workspace
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:3000/healthz', timeout=4)"
ENTRYPOINT ["approval-bot"]
CMD ["serve", "--port", "3000"]
