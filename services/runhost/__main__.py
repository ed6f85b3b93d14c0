from shared.gcfreeze import collector_paused

if __name__ == "__main__":
    # Imported and built without the cyclic collector (shared/gcfreeze.py); it runs again before the start waits.
    with collector_paused():
        from services.runhost.app import create_app
        from shared.runtime import run_service
        from shared.settings import RunhostSettings

        runtime = create_app(RunhostSettings())
    run_service(runtime)
