"""DDL and shared SQL building blocks of the tracedb database (see docs/schema.md)."""
