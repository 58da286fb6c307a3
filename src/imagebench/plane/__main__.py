"""``python -m imagebench.plane serve ...``: the plane's own commands (how a plane process is started).

The command line is ``imagebench plane``'s; only the plane's modules are imported besides it.
"""

import sys

from imagebench.cli import main

if __name__ == "__main__":
    sys.exit(main(["plane", *sys.argv[1:]]))
