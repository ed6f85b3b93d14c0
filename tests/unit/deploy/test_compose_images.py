"""docker-compose.yml and the container test fixtures pick their images by the same variables, with the
same official defaults, and the local images build-images.sh makes are what local-images.env names."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.containers import DEFAULT_IMAGES

ROOT = Path(__file__).resolve().parents[3]


def compose_images() -> dict[str, str]:
    text = (ROOT / "docker-compose.yml").read_text()
    return dict(re.findall(r"image: \$\{(DOSSIER_[A-Z0-9_]+_IMAGE):-([^}]+)\}", text))


def test_compose_and_fixtures_default_to_the_same_official_images() -> None:
    images = compose_images()
    for name, default in DEFAULT_IMAGES.items():
        assert images[name] == default, name


def test_every_infrastructure_image_of_compose_has_a_local_one() -> None:
    lines = (ROOT / "deploy" / "containers" / "local-images.env").read_text().splitlines()
    local = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    assert set(local) == set(compose_images()) - {"DOSSIER_IMAGE"}
