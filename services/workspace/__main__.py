from services.workspace.app import create_app
from shared.runtime import run_service
from shared.settings import WorkspaceSettings

if __name__ == "__main__":
    run_service(create_app(WorkspaceSettings()))
