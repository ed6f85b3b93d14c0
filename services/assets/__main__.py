from services.assets.app import create_app
from shared.runtime import run_service
from shared.settings import AssetsSettings

if __name__ == "__main__":
    run_service(create_app(AssetsSettings()))
