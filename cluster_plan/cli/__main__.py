import sys

from cluster_plan.cli.app import main

sys.exit(main())
