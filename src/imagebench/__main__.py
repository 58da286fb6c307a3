import sys

from imagebench.cli import main

sys.exit(main())
