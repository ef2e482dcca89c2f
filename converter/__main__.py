from converter.tools.cli import main

raise SystemExit(main())
