"""Conclusions drawn from the reports: findings (advise.py) and the regression gate
(diff.py). The report engine reads what they register (query/reports.PREPARERS); it
never imports them."""
from . import advise  # noqa: F401 (registers the findings report's preparer)
from . import critpath  # noqa: F401 (registers the critical path and what-if reports' preparers)
from . import path_totals  # noqa: F401 (critical_path_summary's preparer: the sums --path-totals stored)
from . import critpath_spark  # noqa: F401 (and their form on Spark: query/engines.SPARK_FORMS)
