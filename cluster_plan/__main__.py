import sys

from cluster_plan.cli import main

sys.exit(main())
