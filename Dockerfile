# Slim, non-root image running `approval-bot serve`: HTTP on 3000, or Socket Mode when
# SLACK_APP_TOKEN is set; metrics and health on the admin port (9100) in both modes.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY agent_runtime ./agent_runtime
COPY store ./store
COPY examples /opt/approval-bot/examples
RUN pip install . && useradd --create-home --uid 10001 bot && mkdir -p /data && chown bot /data

USER bot
WORKDIR /data
# The examples are importable (AGENT=examples.plain_graph:build_graph).
ENV PYTHONPATH=/opt/approval-bot DATABASE_URL=sqlite:////data/approval-bot.db WORKSPACE_DIR=/data/workspace \
    ADMIN_PORT=9100 LOG_FORMAT=json
VOLUME /data
EXPOSE 3000 9100
# The admin port answers in HTTP and Socket Mode alike; /healthz fails when the store does not.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('ADMIN_PORT', '9100'), timeout=4)"
ENTRYPOINT ["approval-bot"]
CMD ["serve", "--port", "3000"]
