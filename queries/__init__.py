"""Saved reports: one .sql file each, with a documented header (see tracedb.reports)."""
