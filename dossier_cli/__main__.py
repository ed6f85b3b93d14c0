from dossier_cli.main import main

raise SystemExit(main())
