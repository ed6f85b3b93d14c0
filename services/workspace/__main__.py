from shared.gcfreeze import collector_paused

if __name__ == "__main__":
    # Imported and built without the cyclic collector (shared/gcfreeze.py); it runs again before the start waits.
    with collector_paused():
        from services.workspace.app import create_app
        from shared.runtime import run_service
        from shared.settings import WorkspaceSettings

        runtime = create_app(WorkspaceSettings())
    run_service(runtime)
