import sys

from tracedb.cuda_bench.run import main

sys.exit(main())
