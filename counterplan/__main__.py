"""``python -m counterplan ...`` is the ``counterplan`` command."""

import sys

from counterplan.server.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
