# One image for every Dossier service; docker-compose.yml picks the service with the command.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app

COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
COPY dossier_cli ./dossier_cli
RUN pip install . && useradd --system --uid 10001 dossier

USER dossier
CMD ["python", "-m", "services.gateway"]
