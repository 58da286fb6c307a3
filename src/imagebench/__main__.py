import sys

from imagebench.cli import entry

sys.exit(entry())
