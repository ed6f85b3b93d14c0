from services.artifact.app import create_app
from shared.runtime import run_service
from shared.settings import ArtifactSettings

if __name__ == "__main__":
    run_service(create_app(ArtifactSettings()))
