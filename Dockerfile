# One image for every Dossier service; docker-compose.yml picks the service with the command.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# OpenCV, under the OCR engine of the assets service, links libGL and GLib.
RUN apt-get update && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 && rm -rf /var/lib/apt/lists/*

COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
COPY dossier_cli ./dossier_cli
RUN pip install . && useradd --system --uid 10001 dossier

USER dossier
CMD ["python", "-m", "services.gateway"]
