"""`python -m judgehooks._cli`: the same as the `judgehooks` command."""

from . import main

raise SystemExit(main())
